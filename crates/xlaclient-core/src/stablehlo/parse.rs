//! A parser for the textual MLIR that JAX prints for a StableHLO module
//! (`jax.jit(f).lower(*args).as_text()`): the `module`, its `func.func`s, and each
//! operation in either MLIR syntax, the *generic* one
//! (`"stablehlo.sort"(%a) <{dimension = 1 : i64}> ({ … }) : (…) -> …`) and the
//! *pretty* one each op defines (`stablehlo.add %a, %b : tensor<4xf32>`,
//! `stablehlo.reduce(%x init: %c) applies stablehlo.add across dimensions = [1]`,
//! `stablehlo.while(%i = %c) : … cond { … } do { … }`).
//!
//! The result is a syntax tree ([`Module`]) that knows nothing of what ops mean:
//! an operation is its name, results, and the *items* written between the name and
//! its type (operands, `key = value` attributes, bare keywords, parenthesised
//! groups), its attribute dictionaries, regions and type. What each op's items
//! say is read by the importer ([`mod@super::import`]). Locations (`loc(…)`) and
//! location aliases (`#loc1 = …`) are skipped. Every error names the line and
//! column of the text; no input makes the parser panic, and nesting deeper than
//! [`MAX_DEPTH`] is an error rather than a stack overflow.

use std::fmt;

/// How deeply brackets, attributes and regions may nest.
pub const MAX_DEPTH: usize = 100;

/// A position in the text: 1-based line and column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    /// Line, from 1.
    pub line: u32,
    /// Column (in characters), from 1.
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A parse error: where, and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Where in the text.
    pub pos: Pos,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.pos, self.message)
    }
}

type PResult<T> = std::result::Result<T, ParseError>;

/// A type as written: a ranked tensor (`tensor<2x3xf32>`, `tensor<f32>`), or any
/// other type kept as its text (`!stablehlo.token`, `tuple<…>`), which the
/// importer refuses where it needs a tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    /// `tensor<dims x element>`; the element type as written (`f32`, `i1`, `ui32`).
    Tensor {
        /// The dimensions (a `?` dimension is refused by the parser).
        dims: Vec<i64>,
        /// The element type's spelling.
        elem: String,
    },
    /// A type the parser does not take apart, as written.
    Other(String),
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Tensor { dims, elem } => {
                write!(f, "tensor<")?;
                for d in dims {
                    write!(f, "{d}x")?;
                }
                write!(f, "{elem}>")
            }
            Type::Other(s) => f.write_str(s),
        }
    }
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// An integer, with its type if written (`1 : i64`).
    Int(i64),
    /// A float literal.
    Float(f64),
    /// `true` / `false`.
    Bool(bool),
    /// A string literal.
    Str(String),
    /// A symbol reference `@name`.
    Sym(String),
    /// A bare keyword (`DEFAULT`, `b`, `f`, `THREE_FRY`).
    Ident(String),
    /// `[a, b, …]`.
    List(Vec<Attr>),
    /// `{k = v, …}` (a unit attribute `k` has the value `Unit`).
    Dict(Vec<(String, Attr)>),
    /// `dense<…>` elements: the text between the angle brackets, and the type
    /// written after it inside attribute dictionaries (`dense<…> : tensor<2xi64>`).
    Dense(String, Option<Type>),
    /// `array<i64: 1, 2>`: the elements.
    Array(Vec<i64>),
    /// `#dialect.name<…>` or `#dialect<…>`: the name and the items inside (a
    /// dictionary for `k = v` items, else a list).
    Hash(String, Box<Attr>),
    /// A type used as an attribute.
    Type(Type),
    /// `lo : hi` or `lo : hi : step` inside a list (a pretty slice).
    Range(Vec<i64>),
    /// `a x b` (dot and convolution dimension numbers) and `a -> b`: the parts.
    Seq(Vec<Attr>),
    /// A unit attribute (a key with no value).
    Unit,
}

/// An operand reference: `%name` or `%name#index`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueRef {
    /// The SSA name without `%`.
    pub name: String,
    /// The result index after `#`.
    pub index: Option<u32>,
    /// Where it is written.
    pub pos: Pos,
}

/// One entry of a parenthesised group after an op name.
#[derive(Clone, Debug, PartialEq)]
pub enum GroupItem {
    /// `%v`.
    Value(ValueRef),
    /// `%v = %w` (a while's carried values).
    Bind(String, ValueRef),
    /// `%v init: %w` (a reduce's input and initial value).
    Init(ValueRef, ValueRef),
    /// `%v : type` (a block argument).
    Typed(String, Type),
    /// `key = attr`.
    KeyVal(String, Attr),
}

/// What is written between an op's name and its type.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// An operand.
    Value(ValueRef),
    /// `key = attr`.
    KeyVal(String, Attr),
    /// A bare keyword (`LT`, `applies`, `across`, `stablehlo.add`).
    Ident(String),
    /// `@callee`.
    Sym(String),
    /// `( … )`.
    Group(Vec<GroupItem>),
    /// `[ … ]`, a `dense<…>`, a `#…` or other attribute written bare.
    Attr(Attr),
}

/// A region: its blocks' arguments and operations (one block: JAX's regions
/// have one).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Region {
    /// The block arguments (`^bb0(%a: tensor<f32>, …)`), if written.
    pub args: Vec<(String, Type)>,
    /// The operations.
    pub ops: Vec<Operation>,
}

/// One operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    /// The op's name as written (`stablehlo.add`, `func.call`, `call`, `return`).
    pub name: String,
    /// Where the op's name is.
    pub pos: Pos,
    /// The result names and how many values each names (`%0:2` names two).
    pub results: Vec<(String, usize)>,
    /// The generic form's operands (the pretty form's are among `items`).
    pub operands: Vec<ValueRef>,
    /// The pretty form's items, in order.
    pub items: Vec<Item>,
    /// Properties and attributes (`<{…}>` and `{…}`), merged.
    pub attrs: Vec<(String, Attr)>,
    /// The regions (`({…}, {…})`, `cond {…} do {…}`, a `reducer` body).
    pub regions: Vec<Region>,
    /// Named region labels of the pretty form (`cond`, `do`, `reducer`), in order.
    pub region_labels: Vec<String>,
    /// The block arguments written in `reducer(%a: t, %b: t) (…)` groups.
    pub reducer_args: Vec<Vec<(String, Type)>>,
    /// Operand types (of a functional type `(a, b) -> r`, or the type list).
    pub operand_types: Vec<Type>,
    /// Result types (the single type of the short form is both).
    pub result_types: Vec<Type>,
}

impl Operation {
    /// The attribute `key` from the dictionaries or the pretty `key = value` items.
    pub fn attr(&self, key: &str) -> Option<&Attr> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .or_else(|| {
                self.items.iter().find_map(|i| match i {
                    Item::KeyVal(k, v) if k == key => Some(v),
                    _ => None,
                })
            })
    }
}

/// A function.
#[derive(Clone, Debug, PartialEq)]
pub struct Func {
    /// Its symbol name, without `@`.
    pub name: String,
    /// Where `func.func` is.
    pub pos: Pos,
    /// Argument names (without `%`) and types.
    pub args: Vec<(String, Type)>,
    /// Result types.
    pub results: Vec<Type>,
    /// The body.
    pub body: Region,
}

/// A parsed module: its functions.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    /// The module's name (`@jit_f`), if any.
    pub name: Option<String>,
    /// The functions, in order.
    pub funcs: Vec<Func>,
}

impl Module {
    /// The function named `name`.
    pub fn func(&self, name: &str) -> Option<&Func> {
        self.funcs.iter().find(|f| f.name == name)
    }
}

// ---------------------------------------------------------------------------
// Lexer

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// `%name` / `%name#3` / `%name:2` is split by the parser: the lexer gives
    /// `%name` and the `#3` suffix.
    Value(String, Option<u32>),
    Sym(String),
    Caret(String),
    Ident(String),
    Hash(String),
    Int(i64),
    Float(f64),
    Str(String),
    /// `tensor<…>`, `!dialect.type`, `tuple<…>`: the whole type's text.
    Type(String),
    /// `dense<…>` / `array<…>` / `dense_resource<…>`: the keyword and the
    /// contents between the angle brackets.
    Raw(String, String),
    Punct(&'static str),
    Eof,
}

struct Lexer<'a> {
    src: &'a [u8],
    i: usize,
    line: u32,
    col: u32,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'$'
}

impl<'a> Lexer<'a> {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }

    fn peek_byte(&self, k: usize) -> u8 {
        self.src.get(self.i + k).copied().unwrap_or(0)
    }

    fn bump(&mut self) -> u8 {
        let c = self.peek_byte(0);
        if self.i < self.src.len() {
            self.i += 1;
            if c == b'\n' {
                self.line += 1;
                self.col = 1;
            } else if c & 0xC0 != 0x80 {
                self.col += 1;
            }
        }
        c
    }

    fn err(&self, pos: Pos, message: impl Into<String>) -> ParseError {
        ParseError {
            pos,
            message: message.into(),
        }
    }

    fn skip_space(&mut self) {
        loop {
            let c = self.peek_byte(0);
            if c == b' ' || c == b'\t' || c == b'\n' || c == b'\r' {
                self.bump();
            } else if c == b'/' && self.peek_byte(1) == b'/' {
                while self.i < self.src.len() && self.peek_byte(0) != b'\n' {
                    self.bump();
                }
            } else {
                return;
            }
        }
    }

    fn ident(&mut self) -> String {
        let s = self.i;
        while is_ident_char(self.peek_byte(0)) {
            self.bump();
        }
        String::from_utf8_lossy(&self.src[s..self.i]).into_owned()
    }

    /// The text up to the `>` that closes an already consumed `<`, nested `<>`
    /// and strings included; the `>` is consumed (a `->` inside counts as text).
    fn angle_body(&mut self, start: Pos) -> PResult<String> {
        let s = self.i;
        let mut depth = 1usize;
        loop {
            if self.i >= self.src.len() {
                return Err(self.err(start, "unclosed `<`"));
            }
            let c = self.peek_byte(0);
            if c == b'"' {
                self.bump();
                while self.i < self.src.len() && self.peek_byte(0) != b'"' {
                    if self.peek_byte(0) == b'\\' {
                        self.bump();
                    }
                    self.bump();
                }
                self.bump();
                continue;
            }
            if c == b'-' && self.peek_byte(1) == b'>' {
                self.bump();
                self.bump();
                continue;
            }
            if c == b'<' {
                depth += 1;
            } else if c == b'>' {
                depth -= 1;
                if depth == 0 {
                    let body = String::from_utf8_lossy(&self.src[s..self.i]).into_owned();
                    self.bump();
                    return Ok(body);
                }
            }
            self.bump();
        }
    }

    /// Skips a balanced `( … )` whose `(` is next (a `loc(…)`).
    fn skip_parens(&mut self, start: Pos) -> PResult<()> {
        let mut depth = 0usize;
        loop {
            if self.i >= self.src.len() {
                return Err(self.err(start, "unclosed `loc(`"));
            }
            match self.bump() {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                b'"' => {
                    while self.i < self.src.len() && self.peek_byte(0) != b'"' {
                        if self.peek_byte(0) == b'\\' {
                            self.bump();
                        }
                        self.bump();
                    }
                    self.bump();
                }
                _ => {}
            }
        }
    }

    fn next(&mut self) -> PResult<(Tok, Pos)> {
        loop {
            self.skip_space();
            let pos = self.pos();
            if self.i >= self.src.len() {
                return Ok((Tok::Eof, pos));
            }
            let c = self.peek_byte(0);
            let tok = match c {
                b'%' | b'@' | b'^' => {
                    self.bump();
                    let name = if self.peek_byte(0) == b'"' {
                        self.string(pos)?
                    } else {
                        self.ident()
                    };
                    if name.is_empty() {
                        return Err(self.err(pos, format!("a name after `{}`", c as char)));
                    }
                    match c {
                        b'%' => {
                            let mut index = None;
                            if self.peek_byte(0) == b'#' && self.peek_byte(1).is_ascii_digit() {
                                self.bump();
                                let s = self.i;
                                while self.peek_byte(0).is_ascii_digit() {
                                    self.bump();
                                }
                                let digits = String::from_utf8_lossy(&self.src[s..self.i]);
                                index = Some(digits.parse::<u32>().map_err(|_| {
                                    self.err(pos, format!("result index `{digits}` too large"))
                                })?);
                            }
                            Tok::Value(name, index)
                        }
                        b'@' => Tok::Sym(name),
                        _ => Tok::Caret(name),
                    }
                }
                b'#' => {
                    self.bump();
                    Tok::Hash(self.ident())
                }
                b'!' => {
                    self.bump();
                    let mut t = format!("!{}", self.ident());
                    if self.peek_byte(0) == b'<' {
                        self.bump();
                        t = format!("{t}<{}>", self.angle_body(pos)?);
                    }
                    Tok::Type(t)
                }
                b'"' => Tok::Str(self.string(pos)?),
                b'0'..=b'9' | b'-' | b'+' if c != b'-' || self.peek_byte(1) != b'>' => {
                    self.number(pos)?
                }
                _ if is_ident_start(c) => {
                    let id = self.ident();
                    if id == "loc" && self.peek_byte(0) == b'(' {
                        self.skip_parens(pos)?;
                        continue;
                    }
                    if self.peek_byte(0) == b'<'
                        && matches!(
                            id.as_str(),
                            "tensor" | "tuple" | "complex" | "vector" | "memref"
                        )
                    {
                        self.bump();
                        Tok::Type(format!("{id}<{}>", self.angle_body(pos)?))
                    } else if self.peek_byte(0) == b'<'
                        && matches!(id.as_str(), "dense" | "array" | "dense_resource" | "sparse")
                    {
                        self.bump();
                        Tok::Raw(id, self.angle_body(pos)?)
                    } else {
                        Tok::Ident(id)
                    }
                }
                _ => {
                    let two = [c, self.peek_byte(1)];
                    let p: &'static str = match &two {
                        b"->" => "->",
                        b"<{" => "<{",
                        b"}>" => "}>",
                        _ => match c {
                            b'(' => "(",
                            b')' => ")",
                            b'[' => "[",
                            b']' => "]",
                            b'{' => "{",
                            b'}' => "}",
                            b'<' => "<",
                            b'>' => ">",
                            b',' => ",",
                            b':' => ":",
                            b'=' => "=",
                            b'?' => "?",
                            b'*' => "*",
                            _ => {
                                let ch = std::str::from_utf8(&self.src[self.i..])
                                    .ok()
                                    .and_then(|s| s.chars().next())
                                    .unwrap_or('?');
                                return Err(self.err(pos, format!("unexpected character `{ch}`")));
                            }
                        },
                    };
                    for _ in 0..p.len() {
                        self.bump();
                    }
                    Tok::Punct(p)
                }
            };
            return Ok((tok, pos));
        }
    }

    fn string(&mut self, start: Pos) -> PResult<String> {
        self.bump();
        let mut out = Vec::new();
        loop {
            if self.i >= self.src.len() {
                return Err(self.err(start, "unterminated string"));
            }
            let c = self.bump();
            match c {
                b'"' => return Ok(String::from_utf8_lossy(&out).into_owned()),
                b'\\' => {
                    let h = [self.peek_byte(0), self.peek_byte(1)];
                    if let Some(v) = std::str::from_utf8(&h)
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                    {
                        self.bump();
                        self.bump();
                        out.push(v);
                    } else {
                        out.push(self.bump());
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn number(&mut self, pos: Pos) -> PResult<Tok> {
        let s = self.i;
        if matches!(self.peek_byte(0), b'-' | b'+') {
            self.bump();
        }
        if self.peek_byte(0) == b'0' && matches!(self.peek_byte(1), b'x' | b'X') {
            self.bump();
            self.bump();
            let hs = self.i;
            while self.peek_byte(0).is_ascii_hexdigit() {
                self.bump();
            }
            let hex = String::from_utf8_lossy(&self.src[hs..self.i]);
            let v = u64::from_str_radix(&hex, 16)
                .map_err(|_| self.err(pos, format!("bad hexadecimal number `0x{hex}`")))?;
            let neg = self.src[s] == b'-';
            return Ok(Tok::Int(if neg {
                (v as i64).wrapping_neg()
            } else {
                v as i64
            }));
        }
        let mut float = false;
        loop {
            let c = self.peek_byte(0);
            if c.is_ascii_digit() {
                self.bump();
            } else if c == b'.' {
                float = true;
                self.bump();
            } else if (c == b'e' || c == b'E')
                && (self.peek_byte(1).is_ascii_digit()
                    || matches!(self.peek_byte(1), b'-' | b'+')
                        && self.peek_byte(2).is_ascii_digit())
            {
                float = true;
                self.bump();
                self.bump();
            } else {
                break;
            }
        }
        let text = String::from_utf8_lossy(&self.src[s..self.i]).into_owned();
        if text == "-" || text == "+" {
            // `inf` / `nan` spelled with a sign are not MLIR; a lone sign is an error.
            return Err(self.err(pos, "a number after the sign"));
        }
        if float {
            text.parse::<f64>()
                .map(Tok::Float)
                .map_err(|_| self.err(pos, format!("bad number `{text}`")))
        } else {
            text.parse::<i64>()
                .map(Tok::Int)
                .map_err(|_| self.err(pos, format!("integer `{text}` out of range")))
        }
    }
}

// ---------------------------------------------------------------------------
// Parser

struct Parser<'a> {
    lex: Lexer<'a>,
    tok: Tok,
    pos: Pos,
    depth: usize,
}

/// Parses a module (or a bare list of `func.func`s) from MLIR text.
pub fn parse(text: &str) -> PResult<Module> {
    let mut p = Parser {
        lex: Lexer {
            src: text.as_bytes(),
            i: 0,
            line: 1,
            col: 1,
        },
        tok: Tok::Eof,
        pos: Pos::default(),
        depth: 0,
    };
    p.advance()?;
    p.module()
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Value(n, _) => format!("`%{n}`"),
        Tok::Sym(n) => format!("`@{n}`"),
        Tok::Caret(n) => format!("`^{n}`"),
        Tok::Ident(n) => format!("`{n}`"),
        Tok::Hash(n) => format!("`#{n}`"),
        Tok::Int(v) => format!("`{v}`"),
        Tok::Float(v) => format!("`{v}`"),
        Tok::Str(s) => format!("the string {s:?}"),
        Tok::Type(t) => format!("`{t}`"),
        Tok::Raw(k, b) => format!("`{k}<{b}>`"),
        Tok::Punct(p) => format!("`{p}`"),
        Tok::Eof => "the end of the text".into(),
    }
}

impl Parser<'_> {
    fn advance(&mut self) -> PResult<Tok> {
        let (t, p) = self.lex.next()?;
        self.pos = p;
        Ok(std::mem::replace(&mut self.tok, t))
    }

    fn err<T>(&self, message: impl Into<String>) -> PResult<T> {
        Err(ParseError {
            pos: self.pos,
            message: message.into(),
        })
    }

    fn unexpected<T>(&self, wanted: &str) -> PResult<T> {
        self.err(format!("expected {wanted}, found {}", describe(&self.tok)))
    }

    fn is(&self, p: &str) -> bool {
        matches!(&self.tok, Tok::Punct(q) if *q == p)
    }

    fn is_ident(&self, s: &str) -> bool {
        matches!(&self.tok, Tok::Ident(q) if q == s)
    }

    fn eat(&mut self, p: &str) -> PResult<bool> {
        if self.is(p) {
            self.advance()?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn expect(&mut self, p: &str) -> PResult<()> {
        if self.eat(p)? {
            Ok(())
        } else {
            self.unexpected(&format!("`{p}`"))
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(format!("nested more than {MAX_DEPTH} deep"));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn module(&mut self) -> PResult<Module> {
        let mut m = Module {
            name: None,
            funcs: Vec::new(),
        };
        self.skip_aliases()?;
        let wrapped = self.is_ident("module") || self.is_ident("builtin.module");
        if wrapped {
            self.advance()?;
            if let Tok::Sym(n) = &self.tok {
                m.name = Some(n.clone());
                self.advance()?;
            }
            if self.is_ident("attributes") {
                self.advance()?;
                self.dict()?;
            }
            self.expect("{")?;
        }
        loop {
            self.skip_aliases()?;
            if wrapped && self.eat("}")? {
                break;
            }
            if !wrapped && self.tok == Tok::Eof {
                break;
            }
            if self.is_ident("func.func") || self.is_ident("func") {
                m.funcs.push(self.func()?);
            } else if matches!(&self.tok, Tok::Ident(n) if n.starts_with("sdy.")) {
                // Shardy's mesh declarations: no computation.
                self.operation()?;
            } else {
                return self.unexpected("`func.func`");
            }
        }
        self.skip_aliases()?;
        if self.tok != Tok::Eof {
            return self.unexpected("the end of the text after the module");
        }
        Ok(m)
    }

    /// Skips `#alias = …` definitions (location aliases `#loc1 = loc(…)` and
    /// attribute aliases), each to the end of its line.
    fn skip_aliases(&mut self) -> PResult<()> {
        while let Tok::Hash(_) = &self.tok {
            let line = self.pos.line;
            self.advance()?;
            if !self.is("=") {
                return self.unexpected("`=` after an alias name at the top level");
            }
            while self.tok != Tok::Eof && self.pos.line == line {
                self.advance()?;
            }
        }
        Ok(())
    }

    fn func(&mut self) -> PResult<Func> {
        let pos = self.pos;
        self.advance()?;
        if self.is_ident("public") || self.is_ident("private") || self.is_ident("nested") {
            self.advance()?;
        }
        let name = match self.advance()? {
            Tok::Sym(n) => n,
            t => {
                return Err(ParseError {
                    pos: self.pos,
                    message: format!("expected the function's `@name`, found {}", describe(&t)),
                });
            }
        };
        self.expect("(")?;
        let mut args = Vec::new();
        if !self.eat(")")? {
            loop {
                let n = match &self.tok {
                    Tok::Value(n, None) => n.clone(),
                    _ => return self.unexpected("an argument `%name`"),
                };
                self.advance()?;
                self.expect(":")?;
                let t = self.ty()?;
                if self.is("{") {
                    self.dict()?;
                }
                args.push((n, t));
                if self.eat(")")? {
                    break;
                }
                self.expect(",")?;
            }
        }
        let mut results = Vec::new();
        if self.eat("->")? {
            if self.eat("(")? {
                if !self.eat(")")? {
                    loop {
                        results.push(self.ty()?);
                        if self.is("{") {
                            self.dict()?;
                        }
                        if self.eat(")")? {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
            } else {
                results.push(self.ty()?);
            }
        }
        if self.is_ident("attributes") {
            self.advance()?;
            self.dict()?;
        }
        let body = self.region()?;
        Ok(Func {
            name,
            pos,
            args,
            results,
            body,
        })
    }

    fn ty(&mut self) -> PResult<Type> {
        let pos = self.pos;
        match self.advance()? {
            Tok::Type(t) => parse_type(&t).map_err(|message| ParseError { pos, message }),
            Tok::Ident(t) => Ok(Type::Other(t)),
            t => Err(ParseError {
                pos,
                message: format!("expected a type, found {}", describe(&t)),
            }),
        }
    }

    /// `{ ops }` or `{ ^bb0(args): ops }`.
    fn region(&mut self) -> PResult<Region> {
        self.enter()?;
        self.expect("{")?;
        let mut r = Region::default();
        if let Tok::Caret(_) = &self.tok {
            self.advance()?;
            if self.eat("(")? && !self.eat(")")? {
                loop {
                    let n = match &self.tok {
                        Tok::Value(n, None) => n.clone(),
                        _ => return self.unexpected("a block argument `%name`"),
                    };
                    self.advance()?;
                    self.expect(":")?;
                    r.args.push((n, self.ty()?));
                    if self.eat(")")? {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            self.expect(":")?;
        }
        while !self.eat("}")? {
            if self.tok == Tok::Eof {
                return self.unexpected("`}` closing the region");
            }
            if let Tok::Caret(_) = &self.tok {
                return self.err("a region with several blocks is not supported");
            }
            r.ops.push(self.operation()?);
        }
        self.leave();
        Ok(r)
    }

    fn operation(&mut self) -> PResult<Operation> {
        let mut results = Vec::new();
        if let Tok::Value(_, _) = &self.tok {
            loop {
                let n = match self.advance()? {
                    Tok::Value(n, None) => n,
                    t => {
                        return Err(ParseError {
                            pos: self.pos,
                            message: format!("expected a result `%name`, found {}", describe(&t)),
                        });
                    }
                };
                let mut count = 1usize;
                if self.eat(":")? {
                    match self.advance()? {
                        Tok::Int(k) if (1..=1 << 20).contains(&k) => count = k as usize,
                        t => {
                            return Err(ParseError {
                                pos: self.pos,
                                message: format!("expected a result count, found {}", describe(&t)),
                            });
                        }
                    }
                }
                results.push((n, count));
                if self.eat("=")? {
                    break;
                }
                self.expect(",")?;
            }
        }
        let pos = self.pos;
        let (name, generic) = match self.advance()? {
            Tok::Ident(n) => (n, false),
            Tok::Str(n) => (n, true),
            t => {
                return Err(ParseError {
                    pos,
                    message: format!("expected an operation name, found {}", describe(&t)),
                });
            }
        };
        let mut op = Operation {
            name,
            pos,
            results,
            operands: Vec::new(),
            items: Vec::new(),
            attrs: Vec::new(),
            regions: Vec::new(),
            region_labels: Vec::new(),
            reducer_args: Vec::new(),
            operand_types: Vec::new(),
            result_types: Vec::new(),
        };
        if generic {
            self.expect("(")?;
            if !self.eat(")")? {
                loop {
                    op.operands.push(self.value_ref()?);
                    if self.eat(")")? {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            if self.eat("<{")? {
                op.attrs.extend(self.dict_body("}>")?);
            }
            if self.is("(") {
                self.advance()?;
                loop {
                    op.regions.push(self.region()?);
                    if self.eat(")")? {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            if self.is("{") {
                let d = self.dict()?;
                op.attrs.extend(d);
            }
            self.expect(":")?;
            self.signature(&mut op)?;
            return Ok(op);
        }
        // Pretty form: items up to the type.
        loop {
            match &self.tok {
                Tok::Punct(":") => break,
                Tok::Punct("}") | Tok::Eof => {
                    // `return` / `stablehlo.return` with no values.
                    return Ok(op);
                }
                Tok::Punct(",") => {
                    self.advance()?;
                    if self.is(":") || self.is(",") {
                        return self.unexpected("an operand or attribute after `,`");
                    }
                }
                Tok::Value(_, _) => {
                    let v = self.value_ref()?;
                    op.items.push(Item::Value(v));
                }
                Tok::Ident(id) if id == "cond" || id == "do" || id == "reducer" => break,
                Tok::Ident(_) => {
                    let id = match self.advance()? {
                        Tok::Ident(id) => id,
                        _ => unreachable_tok(),
                    };
                    if self.eat("=")? {
                        let v = self.attr_value(false)?;
                        op.items.push(Item::KeyVal(id, v));
                    } else {
                        op.items.push(Item::Ident(id));
                    }
                }
                Tok::Sym(s) => {
                    let s = s.clone();
                    self.advance()?;
                    op.items.push(Item::Sym(s));
                }
                Tok::Punct("(") => {
                    let g = self.group()?;
                    op.items.push(Item::Group(g));
                }
                Tok::Punct("{") => {
                    let d = self.dict()?;
                    op.attrs.extend(d);
                }
                Tok::Punct("<{") => {
                    self.advance()?;
                    op.attrs.extend(self.dict_body("}>")?);
                }
                _ => {
                    let a = self.attr_value(false)?;
                    op.items.push(Item::Attr(a));
                }
            }
        }
        if self.eat(":")? {
            self.signature(&mut op)?;
        }
        // Regions of the pretty form.
        loop {
            if self.is_ident("cond") || self.is_ident("do") {
                let Tok::Ident(l) = self.advance()? else {
                    unreachable_tok()
                };
                op.region_labels.push(l);
                op.regions.push(self.region()?);
            } else if self.is_ident("reducer") {
                self.advance()?;
                op.region_labels.push("reducer".into());
                while self.is("(") {
                    let g = self.group()?;
                    let mut args = Vec::new();
                    for i in g {
                        match i {
                            GroupItem::Typed(n, t) => args.push((n, t)),
                            _ => return self.err("a reducer argument is `%name: type`"),
                        }
                    }
                    op.reducer_args.push(args);
                }
                op.regions.push(self.region()?);
            } else {
                break;
            }
        }
        Ok(op)
    }

    /// After the `:`: `(a, b) -> r`, `(a) -> (r, s)`, `a -> r`, or a type list.
    fn signature(&mut self, op: &mut Operation) -> PResult<()> {
        let mut ins = Vec::new();
        if self.eat("(")? {
            if !self.eat(")")? {
                loop {
                    ins.push(self.ty()?);
                    if self.eat(")")? {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            self.expect("->")?;
        } else {
            ins.push(self.ty()?);
            while self.is(",") {
                self.advance()?;
                ins.push(self.ty()?);
            }
            if !self.eat("->")? {
                op.result_types = ins.clone();
                op.operand_types = ins;
                return Ok(());
            }
        }
        op.operand_types = ins;
        if self.eat("(")? {
            if !self.eat(")")? {
                loop {
                    op.result_types.push(self.ty()?);
                    if self.eat(")")? {
                        break;
                    }
                    self.expect(",")?;
                }
            }
        } else {
            op.result_types.push(self.ty()?);
        }
        Ok(())
    }

    fn value_ref(&mut self) -> PResult<ValueRef> {
        let pos = self.pos;
        match self.advance()? {
            Tok::Value(name, index) => Ok(ValueRef { name, index, pos }),
            t => Err(ParseError {
                pos,
                message: format!("expected an operand `%name`, found {}", describe(&t)),
            }),
        }
    }

    /// `( item, … )` after an op name.
    fn group(&mut self) -> PResult<Vec<GroupItem>> {
        self.enter()?;
        self.expect("(")?;
        let mut out = Vec::new();
        if !self.eat(")")? {
            loop {
                let item = match &self.tok {
                    Tok::Value(_, _) => {
                        let v = self.value_ref()?;
                        if self.eat("=")? {
                            GroupItem::Bind(v.name, self.value_ref()?)
                        } else if self.is_ident("init") {
                            self.advance()?;
                            self.expect(":")?;
                            GroupItem::Init(v, self.value_ref()?)
                        } else if self.eat(":")? {
                            GroupItem::Typed(v.name, self.ty()?)
                        } else {
                            GroupItem::Value(v)
                        }
                    }
                    Tok::Ident(_) => {
                        let Tok::Ident(k) = self.advance()? else {
                            unreachable_tok()
                        };
                        self.expect("=")?;
                        GroupItem::KeyVal(k, self.attr_value(false)?)
                    }
                    _ => return self.unexpected("an operand or `key = value`"),
                };
                out.push(item);
                if self.eat(")")? {
                    break;
                }
                self.expect(",")?;
            }
        }
        self.leave();
        Ok(out)
    }

    fn dict(&mut self) -> PResult<Vec<(String, Attr)>> {
        self.expect("{")?;
        self.dict_body("}")
    }

    fn dict_body(&mut self, close: &str) -> PResult<Vec<(String, Attr)>> {
        self.enter()?;
        let mut out = Vec::new();
        if !self.eat(close)? {
            loop {
                let k = match self.advance()? {
                    Tok::Ident(k) | Tok::Str(k) => k,
                    t => {
                        return Err(ParseError {
                            pos: self.pos,
                            message: format!("expected an attribute name, found {}", describe(&t)),
                        });
                    }
                };
                let v = if self.eat("=")? {
                    self.attr_value(true)?
                } else {
                    Attr::Unit
                };
                out.push((k, v));
                if self.eat(close)? {
                    break;
                }
                self.expect(",")?;
            }
        }
        self.leave();
        Ok(out)
    }

    /// An attribute value with its `x` / `->` continuations; `typed`: a `: type`
    /// after an integer, float or `dense<…>` belongs to it (inside dictionaries).
    fn attr_value(&mut self, typed: bool) -> PResult<Attr> {
        let first = self.attr_atom(typed)?;
        let mut parts = vec![first];
        loop {
            let joined =
                self.is_ident("x") || self.is("->") && matches!(parts.last(), Some(Attr::List(_)));
            if !joined {
                break;
            }
            self.advance()?;
            parts.push(self.attr_atom(typed)?);
        }
        Ok(if parts.len() == 1 {
            parts.pop().unwrap_or(Attr::Unit)
        } else {
            Attr::Seq(parts)
        })
    }

    fn type_suffix(&mut self, typed: bool) -> PResult<Option<Type>> {
        if typed && self.is(":") {
            self.advance()?;
            return Ok(Some(self.ty()?));
        }
        Ok(None)
    }

    fn attr_atom(&mut self, typed: bool) -> PResult<Attr> {
        self.enter()?;
        let pos = self.pos;
        let a = match self.advance()? {
            Tok::Int(v) => {
                self.type_suffix(typed)?;
                Attr::Int(v)
            }
            Tok::Float(v) => {
                self.type_suffix(typed)?;
                Attr::Float(v)
            }
            Tok::Ident(id) => match id.as_str() {
                "true" => Attr::Bool(true),
                "false" => Attr::Bool(false),
                "unit" => Attr::Unit,
                _ => Attr::Ident(id),
            },
            Tok::Str(s) => {
                self.type_suffix(typed)?;
                Attr::Str(s)
            }
            Tok::Sym(s) => Attr::Sym(s),
            Tok::Type(t) => {
                Attr::Type(parse_type(&t).map_err(|message| ParseError { pos, message })?)
            }
            Tok::Raw(kind, body) => match kind.as_str() {
                "array" => {
                    Attr::Array(parse_array(&body).map_err(|message| ParseError { pos, message })?)
                }
                "dense" => Attr::Dense(body, self.type_suffix(typed)?),
                _ => {
                    return Err(ParseError {
                        pos,
                        message: format!("`{kind}<…>` attributes are not supported"),
                    });
                }
            },
            Tok::Hash(name) => {
                let inner = if self.eat("<")? {
                    self.hash_body()?
                } else {
                    Attr::Unit
                };
                Attr::Hash(name, Box::new(inner))
            }
            Tok::Punct("[") => {
                let mut items = Vec::new();
                if !self.eat("]")? {
                    loop {
                        let v = self.attr_value(typed)?;
                        // A pretty slice: `lo : hi` or `lo : hi : step`.
                        let v = if let Attr::Int(lo) = v {
                            let mut r = vec![lo];
                            while self.is(":") {
                                self.advance()?;
                                match self.advance()? {
                                    Tok::Int(x) => r.push(x),
                                    t => {
                                        return Err(ParseError {
                                            pos: self.pos,
                                            message: format!(
                                                "expected an integer in a slice, found {}",
                                                describe(&t)
                                            ),
                                        });
                                    }
                                }
                            }
                            if r.len() == 1 {
                                Attr::Int(lo)
                            } else {
                                Attr::Range(r)
                            }
                        } else {
                            v
                        };
                        items.push(v);
                        if self.eat("]")? {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Attr::List(items)
            }
            Tok::Punct("{") => Attr::Dict(self.dict_body("}")?),
            t => {
                return Err(ParseError {
                    pos,
                    message: format!("expected an attribute value, found {}", describe(&t)),
                });
            }
        };
        self.leave();
        Ok(a)
    }

    /// The inside of `#name<…>` after the `<`: `k = v, …` (a dictionary), or
    /// items (`precision DEFAULT`, `[b, 0, 1, f]x[…]->[…]`), up to the `>`.
    fn hash_body(&mut self) -> PResult<Attr> {
        let mut dict = Vec::new();
        let mut list = Vec::new();
        while !self.eat(">")? {
            if self.tok == Tok::Eof {
                return self.unexpected("`>`");
            }
            if self.eat(",")? {
                continue;
            }
            if let Tok::Ident(k) = &self.tok {
                let k = k.clone();
                self.advance()?;
                if self.eat("=")? {
                    dict.push((k, self.attr_value(true)?));
                } else {
                    list.push(Attr::Ident(k));
                }
                continue;
            }
            list.push(self.attr_value(true)?);
        }
        Ok(if !dict.is_empty() {
            Attr::Dict(dict)
        } else {
            Attr::List(list)
        })
    }
}

fn unreachable_tok() -> ! {
    // The token was matched just before it was taken.
    unreachable!("token checked before advancing")
}

/// Parses a type's text: `tensor<2x3xf32>`; anything else stays as its text.
fn parse_type(t: &str) -> std::result::Result<Type, String> {
    let Some(body) = t.strip_prefix("tensor<").and_then(|b| b.strip_suffix('>')) else {
        return Ok(Type::Other(t.to_string()));
    };
    // An encoding (`tensor<4xf32, #enc>`) is not something JAX writes.
    if body.contains(',') {
        return Err(format!(
            "tensor type `{t}` with an encoding is not supported"
        ));
    }
    // Leading `Nx` dimensions, then the element type (which may hold an `x`
    // itself: `complex<f32>`).
    let mut dims: Vec<&str> = Vec::new();
    let mut elem = body;
    while let Some(i) = elem.find('x') {
        let head = &elem[..i];
        let is_dim = !head.is_empty()
            && head
                .trim()
                .chars()
                .all(|c| c.is_ascii_digit() || c == '?' || c == '*' || c == '-');
        if !is_dim {
            break;
        }
        dims.push(head);
        elem = &elem[i + 1..];
    }
    if elem.trim().is_empty() {
        return Err(format!("tensor type `{t}` without an element type"));
    }
    let mut out = Vec::with_capacity(dims.len());
    for d in &dims {
        if *d == "?" {
            return Err(format!("dynamic dimensions are not supported: `{t}`"));
        }
        if *d == "*" {
            return Err(format!("unranked tensors are not supported: `{t}`"));
        }
        let v = d
            .trim()
            .parse::<i64>()
            .map_err(|_| format!("bad dimension `{d}` in `{t}`"))?;
        if v < 0 {
            return Err(format!("negative dimension in `{t}`"));
        }
        out.push(v);
    }
    Ok(Type::Tensor {
        dims: out,
        elem: elem.trim().to_string(),
    })
}

/// `i64: 1, 2` (the inside of `array<…>`).
fn parse_array(body: &str) -> std::result::Result<Vec<i64>, String> {
    let (ty, rest) = body.split_once(':').unwrap_or((body, ""));
    let ty = ty.trim();
    if !matches!(ty, "i64" | "i32" | "i1") {
        return Err(format!("`array<{body}>` of `{ty}` is not supported"));
    }
    rest.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s {
            "true" => Ok(1),
            "false" => Ok(0),
            _ => s
                .parse::<i64>()
                .map_err(|_| format!("bad element `{s}` in `array<{body}>`")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_and_generic_ops() {
        let m = parse(
            r#"module @m attributes {mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32> {jax.arg_info = "x"}) -> (tensor<2xf32> {jax.result_info = ""}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32> loc(#loc3)
    %1 = "stablehlo.sort"(%0) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %2 = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %2 : tensor<i1>
    }) : (tensor<2xf32>) -> tensor<2xf32>
    %3 = stablehlo.slice %arg0 [0:2, 1:3:2] : (tensor<2x3xf32>) -> tensor<2x1xf32>
    return %1 : tensor<2xf32>
  }
}
#loc3 = loc("x.py":3:4)
"#,
        )
        .unwrap();
        assert_eq!(m.name.as_deref(), Some("m"));
        let f = &m.funcs[0];
        assert_eq!(f.args[0].1.to_string(), "tensor<2x3xf32>");
        let ops = &f.body.ops;
        assert_eq!(ops.len(), 5);
        assert_eq!(ops[1].name, "stablehlo.reduce");
        assert!(matches!(&ops[1].items[0], Item::Group(g) if matches!(&g[0], GroupItem::Init(..))));
        assert_eq!(
            ops[1].attr("dimensions"),
            Some(&Attr::List(vec![Attr::Int(1)]))
        );
        assert_eq!(ops[2].attr("dimension"), Some(&Attr::Int(0)));
        assert_eq!(ops[2].regions[0].args.len(), 2);
        assert_eq!(ops[2].pos, Pos { line: 5, col: 10 });
        assert_eq!(
            ops[3].items[1],
            Item::Attr(Attr::List(vec![
                Attr::Range(vec![0, 2]),
                Attr::Range(vec![1, 3, 2])
            ]))
        );
    }

    #[test]
    fn errors_name_the_line_and_column() {
        let e = parse("func.func @f(%a: tensor<2xf32>) {\n  %0 = stablehlo.add %a, : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}").unwrap_err();
        assert_eq!(e.pos.line, 2, "{e}");
        let e = parse("func.func @f(%a: tensor<?xf32>) {}").unwrap_err();
        assert!(e.message.contains("dynamic"), "{e}");
        let deep = format!("func.func @f() {{ %0 = stablehlo.x {}", "[".repeat(10_000));
        assert!(parse(&deep).unwrap_err().message.contains("nested"));
    }
}

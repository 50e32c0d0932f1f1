//! A program built here, handed to JAX as StableHLO (issue 22, item 3's reverse
//! direction). Builds a small policy step (an MLP with softmax, a `fori_loop`
//! refinement, a `cond`, a cumulative sum, an argmax and a gather), runs it on the
//! PJRT plugin, and writes to a directory (the first argument, default
//! `target/stablehlo_to_jax`):
//!
//! - `program.mlir`: `Computation::to_stablehlo()`;
//! - `case.json`: the inputs and the outputs the plugin gave, each as
//!   `{"dtype", "dims", "data"}`.
//!
//! Then `scripts/run_stablehlo_in_jax.py DIR` (under JAX 0.10.2: `. bench/jax_venv.sh`)
//! runs the text in JAX and compares:
//!
//! ```text
//! cargo run --release --example stablehlo_to_jax -- /tmp/shlo
//! . bench/jax_venv.sh && $VENV/bin/python scripts/run_stablehlo_in_jax.py /tmp/shlo
//! ```
//!
//! The last line of the script is `max_abs_err=…`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use xlaclient::{Builder, Client, Computation, ElementType, Shape};

const OBS: i64 = 6;
const HID: i64 = 16;
const ACT: i64 = 4;
const BATCH: i64 = 5;

/// The program: parameters `w1, b1, w2, b2, obs, actions_table`.
pub fn program() -> xlaclient::Result<Computation> {
    let b = Builder::new("policy_step");
    let w1 = b.parameter(0, Shape::of::<f32>(&[OBS, HID]), "w1");
    let b1 = b.parameter(1, Shape::of::<f32>(&[HID]), "b1");
    let w2 = b.parameter(2, Shape::of::<f32>(&[HID, ACT]), "w2");
    let b2 = b.parameter(3, Shape::of::<f32>(&[ACT]), "b2");
    let obs = b.parameter(4, Shape::of::<f32>(&[BATCH, OBS]), "obs");
    let table = b.parameter(5, Shape::of::<i32>(&[ACT]), "table");
    let hidden = (obs.matmul(&w1) + &b1).tanh();
    // Three refinement steps of the hidden state (a while loop in StableHLO).
    let hidden = b.fori_loop(0, 3, hidden, |_, h| (&h * 0.9).sin() + &h * 0.1);
    let logits = hidden.matmul(&w2) + &b2;
    let probs = logits.softmax(1);
    let total = probs.reduce_sum(&[0, 1]);
    // A branch on a run-time value (stablehlo.if).
    let scaled = b.cond(
        &total.gt(&b.constant(0.0f32)),
        probs.clone(),
        |p| p.cumsum(1, false),
        |p| -&p,
    );
    let best = logits.argmax(1);
    let chosen = table.take(&best, 0);
    b.build_tuple(&[&scaled, &best, &chosen])
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

fn array(dtype: &str, dims: &[i64], data: Vec<Value>) -> Value {
    json!({"dtype": dtype, "dims": dims, "data": data})
}

/// Builds the program, runs it on `client` and writes `program.mlir` and
/// `case.json` to `dir`. Gives the StableHLO text.
pub fn write_case(client: &Client, dir: &Path) -> xlaclient::Result<String> {
    let m = program()?;
    let text = m.to_stablehlo()?;
    let mut rng = Rng(22);
    let mut inputs = Vec::new();
    let mut buffers = Vec::new();
    for s in m.parameter_shapes() {
        let dims = s.dims().to_vec();
        let n: i64 = dims.iter().product();
        if s.element_type() == Some(ElementType::S32) {
            let v: Vec<i32> = (0..n as i32).map(|i| 10 * (i + 1)).collect();
            inputs.push(array("int32", &dims, v.iter().map(|x| json!(x)).collect()));
            buffers.push(client.buffer_from_host(&v, &dims)?);
        } else {
            let v: Vec<f32> = (0..n).map(|_| rng.next()).collect();
            inputs.push(array(
                "float32",
                &dims,
                v.iter().map(|x| json!(x)).collect(),
            ));
            buffers.push(client.buffer_from_host(&v, &dims)?);
        }
    }
    let exe = client.compile(&m)?;
    let refs: Vec<_> = buffers.iter().collect();
    let mut outputs = Vec::new();
    for o in exe.execute(&refs)? {
        let dims = o.dims()?;
        outputs.push(match o.element_type()? {
            ElementType::S32 => array(
                "int32",
                &dims,
                o.to_vec::<i32>()?.iter().map(|x| json!(x)).collect(),
            ),
            _ => array(
                "float32",
                &dims,
                o.to_vec::<f32>()?.iter().map(|x| json!(x)).collect(),
            ),
        });
    }
    std::fs::create_dir_all(dir).map_err(io)?;
    std::fs::write(dir.join("program.mlir"), &text).map_err(io)?;
    let case = json!({"inputs": inputs, "outputs": outputs});
    std::fs::write(dir.join("case.json"), case.to_string()).map_err(io)?;
    Ok(text)
}

fn io(e: std::io::Error) -> xlaclient::Error {
    xlaclient::Error::InvalidModule {
        reason: format!("writing the case: {e}"),
    }
}

#[allow(dead_code)]
fn main() -> xlaclient::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/stablehlo_to_jax"));
    let client = Client::cpu()?;
    let text = write_case(&client, &dir)?;
    // What the StableHLO path costs: printing the text, and compiling it against
    // compiling the HLO proto (a client without a compilation cache).
    let fresh = Client::new(
        &xlaclient::Plugin::default_plugin()?,
        &xlaclient::ClientOptions::new().compile_cache(xlaclient::CompileCache::Off),
    )?;
    let m = program()?;
    let t = std::time::Instant::now();
    let reps = 100;
    for _ in 0..reps {
        std::hint::black_box(m.to_stablehlo()?);
    }
    let emit_us = t.elapsed().as_secs_f64() * 1e6 / reps as f64;
    let time = |opts: &xlaclient::CompileOptions| -> xlaclient::Result<f64> {
        let t = std::time::Instant::now();
        fresh.compile_with(&m, opts)?;
        Ok(t.elapsed().as_secs_f64() * 1e3)
    };
    let hlo_ms = time(&xlaclient::CompileOptions::new())?;
    let shlo_ms =
        time(&xlaclient::CompileOptions::new().format(xlaclient::ProgramFormat::StableHlo))?;
    println!(
        "{} instructions: to_stablehlo {emit_us:.0} us; compile from HLO {hlo_ms:.1} ms, \
         from StableHLO {shlo_ms:.1} ms",
        m.ir().instruction_count()
    );
    println!(
        "wrote {} ({} lines of StableHLO) and {}",
        dir.join("program.mlir").display(),
        text.lines().count(),
        dir.join("case.json").display()
    );
    println!(
        "run it in JAX: . bench/jax_venv.sh && $VENV/bin/python scripts/run_stablehlo_in_jax.py {}",
        dir.display()
    );
    Ok(())
}

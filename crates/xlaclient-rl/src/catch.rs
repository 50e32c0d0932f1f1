//! Catch (Podracer's, 10 rows × 5 columns) in plain Rust.
//!
//! A ball falls from the top row, one row per step, in a fixed column; the agent
//! moves a paddle on the bottom row left, not at all, or right. When the ball
//! reaches the paddle's row the episode ends with reward +1 if the paddle is under
//! it, −1 otherwise, and a new episode starts (ball on the top row of a random
//! column, paddle in the middle).
//!
//! The dynamics are the pure function [`step`] on a [`CatchState`], the same as the
//! JAX anchors' (`jax_anakin_catch.py`, `jax_hostloop_catch.py`), so that another
//! implementation (an on-device Catch) can be checked against it for the same actions
//! and reset columns. [`Catch`] wraps it with a seeded [`Rng`] for the reset columns.
//!
//! ```
//! use xlaclient_rl::catch::{self, CatchState};
//!
//! let s = catch::initial_state(3)?;
//! assert_eq!(s, CatchState { ball_y: 0, ball_x: 3, paddle_y: 9, paddle_x: 2 });
//! let (s, reward, discount) = catch::step(s, catch::RIGHT, 0)?;
//! assert_eq!((s.ball_y, s.paddle_x, reward, discount), (1, 3, 0.0, 1.0));
//! # Ok::<(), xlaclient_rl::Error>(())
//! ```

use super::env::{Environment, Rng, Transition};
use crate::error::{Error, Result};

/// Rows of the board.
pub const ROWS: i32 = 10;
/// Columns of the board.
pub const COLUMNS: i32 = 5;
/// Number of actions.
pub const NUM_ACTIONS: usize = 3;
/// Action: move the paddle one column left.
pub const LEFT: usize = 0;
/// Action: keep the paddle where it is.
pub const STAY: usize = 1;
/// Action: move the paddle one column right.
pub const RIGHT: usize = 2;

/// Catch's state, as the anchors' `(ball_y, ball_x, paddle_y, paddle_x)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CatchState {
    /// The ball's row (0 is the top).
    pub ball_y: i32,
    /// The ball's column.
    pub ball_x: i32,
    /// The paddle's row (always the bottom row, `ROWS - 1`).
    pub paddle_y: i32,
    /// The paddle's column.
    pub paddle_x: i32,
}

impl CatchState {
    /// The state as the anchors' vector `[ball_y, ball_x, paddle_y, paddle_x]`.
    pub fn to_array(self) -> [i32; 4] {
        [self.ball_y, self.ball_x, self.paddle_y, self.paddle_x]
    }

    /// The state from `[ball_y, ball_x, paddle_y, paddle_x]`, checked.
    ///
    /// # Errors
    /// [`Error::InvalidState`] when it is not a state Catch can be in (see [`check`](Self::check)).
    pub fn from_array(a: [i32; 4]) -> Result<CatchState> {
        let s = CatchState {
            ball_y: a[0],
            ball_x: a[1],
            paddle_y: a[2],
            paddle_x: a[3],
        };
        s.check()?;
        Ok(s)
    }

    /// Checks that Catch can be in this state: the ball in rows `0..ROWS-1` (it never
    /// rests on the paddle's row: the episode resets) and columns `0..COLUMNS`, the
    /// paddle on row `ROWS - 1` in columns `0..COLUMNS`.
    ///
    /// # Errors
    /// [`Error::InvalidState`] naming the field out of range.
    pub fn check(&self) -> Result<()> {
        let fields = [
            ("ball_y", self.ball_y, 0..ROWS - 1),
            ("ball_x", self.ball_x, 0..COLUMNS),
            ("paddle_y", self.paddle_y, ROWS - 1..ROWS),
            ("paddle_x", self.paddle_x, 0..COLUMNS),
        ];
        match fields.into_iter().find(|(_, v, range)| !range.contains(v)) {
            Some((field, value, range)) => Err(Error::InvalidState {
                env: "Catch",
                field,
                value: value.into(),
                range: range.start.into()..range.end.into(),
            }),
            None => Ok(()),
        }
    }

    /// The board: `ROWS × COLUMNS` values, row after row, 1.0 at the ball's and the
    /// paddle's cells, 0.0 elsewhere.
    pub fn render(&self) -> [f32; (ROWS * COLUMNS) as usize] {
        let mut board = [0.0; (ROWS * COLUMNS) as usize];
        self.render_into(&mut board);
        board
    }

    fn render_into(&self, board: &mut [f32]) {
        board.fill(0.0);
        for (y, x) in [(self.ball_y, self.ball_x), (self.paddle_y, self.paddle_x)] {
            if (0..ROWS).contains(&y) && (0..COLUMNS).contains(&x) {
                board[(y * COLUMNS + x) as usize] = 1.0;
            }
        }
    }
}

/// The first state of an episode: ball on the top row in `column`, paddle in the
/// middle of the bottom row: `(0, column, 9, 2)`.
///
/// # Errors
/// [`Error::InvalidArgument`] when `column` is not in `0..COLUMNS`.
pub fn initial_state(column: usize) -> Result<CatchState> {
    match i32::try_from(column) {
        Ok(c) if c < COLUMNS => Ok(start(c)),
        _ => Err(Error::InvalidArgument {
            what: "column",
            reason: format!("Catch: ball column {column}, must be in 0..{COLUMNS}"),
        }),
    }
}

/// The first state with the ball in `column` (in `0..COLUMNS`, the caller's to
/// check).
fn start(column: i32) -> CatchState {
    CatchState {
        ball_y: 0,
        ball_x: column,
        paddle_y: ROWS - 1,
        paddle_x: COLUMNS / 2,
    }
}

/// One step of Catch, the anchors' `step`: the paddle moves
/// (`paddle_x = clamp(paddle_x + action - 1, 0, COLUMNS - 1)`), the ball falls one
/// row; when it reaches the paddle's row the step is terminal, the reward is +1 if
/// the paddle is in the ball's column and −1 if not, the discount 0, and the next
/// state is [`initial_state`]`(reset_column)`. Otherwise reward 0, discount 1.
/// `reset_column` is used only on a terminal step.
///
/// Returns `(next state, reward, discount)`.
///
/// # Errors
/// [`Error::InvalidState`] when `state` fails [`CatchState::check`], [`Error::InvalidAction`] when `action` is not in
/// `0..3`, or `reset_column` not in `0..COLUMNS`.
pub fn step(
    state: CatchState,
    action: usize,
    reset_column: usize,
) -> Result<(CatchState, f32, f32)> {
    state.check()?;
    if action >= NUM_ACTIONS {
        return Err(Error::InvalidAction {
            what: "Catch (0 left, 1 stay, 2 right)".into(),
            action: action as i64,
            actions: NUM_ACTIONS,
        });
    }
    let reset = initial_state(reset_column)?;
    Ok(advance(state, action, reset))
}

/// [`step`] on arguments known to be valid: a state that passes
/// [`CatchState::check`], an action in `0..NUM_ACTIONS`, and the state an episode
/// ending here restarts in.
fn advance(state: CatchState, action: usize, reset: CatchState) -> (CatchState, f32, f32) {
    // `action` is below NUM_ACTIONS (3), so the cast is exact.
    let paddle_x = (state.paddle_x + action as i32 - 1).clamp(0, COLUMNS - 1);
    let ball_y = state.ball_y + 1;
    if ball_y == state.paddle_y {
        let reward = if paddle_x == state.ball_x { 1.0 } else { -1.0 };
        (reset, reward, 0.0)
    } else {
        let next = CatchState {
            ball_y,
            paddle_x,
            ..state
        };
        (next, 0.0, 1.0)
    }
}

/// The greedy policy's exact expected terminal reward: one episode from each of
/// the `COLUMNS` start columns, the paddle moved by the argmax of `q(board)` (the
/// first maximum among equals, as `jnp.argmax`), the mean of the terminal rewards.
/// Catch has no other randomness within an episode, so this is the expectation
/// over the uniformly random start column.
pub fn greedy_eval(q: impl Fn(&[f32]) -> [f32; NUM_ACTIONS]) -> f64 {
    let mut total = 0.0;
    for column in 0..COLUMNS {
        // Every state here is a start state or one `advance` made from a valid one
        // with an action in range, so none needs checking.
        let mut state = start(column);
        loop {
            let values = q(&state.render());
            let action =
                (0..NUM_ACTIONS).fold(0, |best, a| if values[a] > values[best] { a } else { best });
            let (next, reward, discount) = advance(state, action, start(column));
            if discount == 0.0 {
                total += f64::from(reward);
                break;
            }
            state = next;
        }
    }
    total / f64::from(COLUMNS)
}

/// The Catch environment: a [`CatchState`] and the [`Rng`] that draws each new
/// episode's ball column. Cloning it copies the generator too, so a copy stepped
/// ahead (a planner's simulation) sees the same future as the original would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catch {
    state: CatchState,
    rng: Rng,
}

impl Catch {
    /// A new environment whose ball columns are drawn from `Rng::new(seed)`; the
    /// first episode starts at once.
    pub fn new(seed: u64) -> Catch {
        let mut rng = Rng::new(seed);
        let state = Self::draw(&mut rng);
        Catch { state, rng }
    }

    /// An environment in `state` (checked), drawing later columns from `rng`.
    ///
    /// # Errors
    /// [`Error::InvalidState`] when `state` fails [`CatchState::check`].
    pub fn from_state(state: CatchState, rng: Rng) -> Result<Catch> {
        state.check()?;
        Ok(Catch { state, rng })
    }

    fn draw(rng: &mut Rng) -> CatchState {
        // `below(COLUMNS)` is in `0..COLUMNS` (it refuses only an empty range).
        start(rng.below(COLUMNS as u64).unwrap_or(0) as i32)
    }

    /// The current state.
    pub fn state(&self) -> CatchState {
        self.state
    }
}

impl Environment for Catch {
    fn observation_dims(&self) -> Vec<i64> {
        vec![ROWS as i64, COLUMNS as i64]
    }

    fn num_actions(&self) -> usize {
        NUM_ACTIONS
    }

    fn reset(&mut self) {
        self.state = Self::draw(&mut self.rng);
    }

    /// Steps with [`step`]; the reset column is drawn from the generator only when
    /// the step is terminal (so the sequence of columns does not depend on the
    /// episodes' lengths).
    fn step(&mut self, action: usize) -> Result<Transition> {
        // Checked first: a refused action leaves the state and the generator as
        // they were.
        if action >= NUM_ACTIONS {
            return Err(Error::InvalidAction {
                what: "Catch (0 left, 1 stay, 2 right)".into(),
                action: action as i64,
                actions: NUM_ACTIONS,
            });
        }
        // The column is needed only on the terminal step; draw it there.
        let terminal = self.state.ball_y + 1 == self.state.paddle_y;
        let column = if terminal {
            self.rng.below(COLUMNS as u64)? as usize
        } else {
            0
        };
        let (next, reward, discount) = step(self.state, action, column)?;
        self.state = next;
        Ok(Transition {
            reward,
            discount,
            terminal,
        })
    }

    fn observe(&self, out: &mut [f32]) -> Result<()> {
        let len = (ROWS * COLUMNS) as usize;
        if out.len() != len {
            return Err(Error::Length {
                what: format!("Catch::observe output values (the board is {ROWS} × {COLUMNS})"),
                given: out.len(),
                expected: len,
            });
        }
        self.state.render_into(out);
        Ok(())
    }
}

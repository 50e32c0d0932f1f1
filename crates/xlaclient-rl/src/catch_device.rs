//! Catch (rows 10, columns 5) as ops: a batch of environments stepped inside a
//! compiled program, as the Podracer Anakin notebook steps it on the device.
//!
//! The dynamics are those of `bsuite`'s Catch as the notebook writes them: a ball
//! falls one row per step from the top row of a random column; the paddle on the
//! bottom row moves left, stays or moves right (actions 0, 1, 2), clamped to the
//! board; when the ball reaches the paddle's row the step is terminal, with reward
//! +1 if the paddle is under the ball and −1 otherwise, discount 0, and the
//! environment starts a new episode (a new random ball column). Every other step
//! has reward 0 and discount 1.
//!
//! A state is four `s32[batch]` arrays; observations are `f32[batch, 50]` boards
//! (row-major, 1 at the ball and at the paddle).

use crate::{Comparison, ElementType, Op, Tree};

/// Board rows ([`catch::ROWS`](super::catch::ROWS), as a dimension).
pub const ROWS: i64 = super::catch::ROWS as i64;
/// Board columns ([`catch::COLUMNS`](super::catch::COLUMNS), as a dimension).
pub const COLUMNS: i64 = super::catch::COLUMNS as i64;
/// Observation size: the flattened board.
pub const OBS: i64 = ROWS * COLUMNS;
/// Actions: left, stay, right.
pub const ACTIONS: i64 = super::catch::NUM_ACTIONS as i64;

/// A batch of Catch states, each field `s32[batch]`.
#[derive(Tree, Clone, Debug, PartialEq)]
pub struct CatchState<T> {
    /// The ball's row (0 at the top).
    pub ball_y: T,
    /// The ball's column.
    pub ball_x: T,
    /// The paddle's row (always the bottom row).
    pub paddle_y: T,
    /// The paddle's column.
    pub paddle_x: T,
}

/// The initial states of a batch with the ball in `columns` (`s32[batch]`): the ball
/// on the top row, the paddle on the bottom row in the middle column.
#[track_caller]
pub fn initial_state(columns: &Op) -> CatchState<Op> {
    let b = columns.builder();
    let dims = columns.dims().unwrap_or_default();
    CatchState {
        ball_y: b.zeros(ElementType::S32, &dims),
        ball_x: columns.clone(),
        paddle_y: b.full(ElementType::S32, &dims, (ROWS - 1) as f64),
        paddle_x: b.full(ElementType::S32, &dims, (COLUMNS / 2) as f64),
    }
}

/// The boards, `f32[batch, 50]`: 1 at the ball's and the paddle's cells.
#[track_caller]
pub fn render(s: &CatchState<Op>) -> Op {
    let b = s.ball_y.builder();
    // A state that is not `s32[batch]` fails in the ops below (a failed one
    // carries its error on).
    let batch = s
        .ball_y
        .dims()
        .ok()
        .and_then(|d| d.first().copied())
        .unwrap_or(0);
    let cell = b.iota(ElementType::S32, &[batch, OBS], 1);
    let at = |y: &Op, x: &Op| {
        let i = &(y * COLUMNS) + x;
        cell.compare(
            &i.expand_dims(1).broadcast_to(&[batch, OBS]),
            Comparison::Eq,
        )
    };
    at(&s.ball_y, &s.ball_x)
        .or(&at(&s.paddle_y, &s.paddle_x))
        .convert(ElementType::F32)
}

/// One step of every environment with `actions` (`s32[batch]`, 0 left, 1 stay, 2
/// right); `resets` (`s32[batch]`) is the ball column an environment starts its next
/// episode with if this step ends one. Returns the next states, the rewards and the
/// discounts (`f32[batch]`).
#[track_caller]
pub fn step(s: &CatchState<Op>, actions: &Op, resets: &Op) -> (CatchState<Op>, Op, Op) {
    let b = s.ball_y.builder();
    let paddle_x = (&(&s.paddle_x + actions) - 1i64)
        .clamp(&b.constant(0i32), &b.constant((COLUMNS - 1) as i32));
    let ball_y = &s.ball_y + 1i64;
    let terminal = ball_y.compare(&s.paddle_y, Comparison::Eq);
    let caught = paddle_x.compare(&s.ball_x, Comparison::Eq);
    let dims = actions.dims().unwrap_or_default();
    let one = b.ones(ElementType::F32, &dims);
    let zero = b.zeros(ElementType::F32, &dims);
    let reward = b.select(&terminal, &b.select(&caught, &one, &(-&one)), &zero);
    let discount = b.select(&terminal, &zero, &one);
    let fresh = initial_state(resets);
    let next = CatchState {
        ball_y: b.select(&terminal, &fresh.ball_y, &ball_y),
        ball_x: b.select(&terminal, &fresh.ball_x, &s.ball_x),
        paddle_y: b.select(&terminal, &fresh.paddle_y, &s.paddle_y),
        paddle_x: b.select(&terminal, &fresh.paddle_x, &paddle_x),
    };
    (next, reward, discount)
}

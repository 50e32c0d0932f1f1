//! Two-player board games for planning agents: the [`TwoPlayerGame`] trait and
//! [`ConnectFour`] (6 rows × 7 columns, bitboards).
//!
//! A game is a value: [`Clone`] it to search ahead (an MCTS agent clones the root
//! for every simulation). Moves are columns `0..7`; a move into a full column, out
//! of range, or after the game ended is an [`Error`], never a panic, and leaves the
//! game as it was.
//!
//! ```
//! use xlaclient_rl::connect_four::{ConnectFour, Outcome, TwoPlayerGame};
//!
//! // Player 0 stacks four in column 3 while player 1 plays column 4.
//! let game = ConnectFour::from_moves(&[3, 4, 3, 4, 3, 4, 3])?;
//! assert_eq!(game.outcome(), Some(Outcome::Win(0)));
//! assert!(game.clone().play(0).is_err()); // the game is over
//! # Ok::<(), xlaclient_rl::Error>(())
//! ```

use std::fmt;

use crate::error::{Error, Result};

/// How a game ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The player (0 moved first, 1 second) made a winning line.
    Win(usize),
    /// The board filled up with no winner.
    Draw,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Win(p) => write!(f, "player {p} won"),
            Outcome::Draw => f.write_str("draw"),
        }
    }
}

/// A deterministic, alternating two-player game with a finite set of actions, as
/// planning agents (e.g. [`MctsAgent`](crate::agents::MctsAgent)) see it.
///
/// Players are `0` (moves first) and `1`. The observation is always from the
/// point of view of the player to move, so one network serves both sides.
pub trait TwoPlayerGame: Clone {
    /// The number of actions; legal ones are a subset of `0..num_actions()`.
    fn num_actions(&self) -> usize;

    /// The dimensions of one observation.
    fn observation_dims(&self) -> Vec<i64>;

    /// The player to move (0 or 1).
    fn current_player(&self) -> usize;

    /// Whether `action` is legal now (in range, allowed, and the game not over).
    fn is_legal(&self, action: usize) -> bool;

    /// The legal actions, ascending (empty once the game is over).
    fn legal_actions(&self) -> Vec<usize> {
        (0..self.num_actions())
            .filter(|&a| self.is_legal(a))
            .collect()
    }

    /// Plays `action` for the player to move.
    ///
    /// # Errors
    /// [`Error::InvalidAction`] for an action that is not legal, [`Error::GameOver`]
    /// after the game ended; the game is then unchanged.
    fn play(&mut self, action: usize) -> Result<()>;

    /// The outcome, once the game is over (`None` while it goes on).
    fn outcome(&self) -> Option<Outcome>;

    /// Writes the observation (from the mover's point of view) into `out`.
    ///
    /// # Errors
    /// [`Error::Length`] when `out` does not hold exactly one observation.
    fn observe(&self, out: &mut [f32]) -> Result<()>;

    /// The number of values in one observation.
    fn observation_len(&self) -> usize {
        self.observation_dims()
            .iter()
            .map(|&d| usize::try_from(d).unwrap_or(0))
            .product()
    }

    /// The observation as a new vector.
    fn observation(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.observation_len()];
        // The length is the one `observe` asks for.
        let _ = self.observe(&mut out);
        out
    }
}

/// Rows of the Connect Four board.
pub const ROWS: usize = 6;
/// Columns of the Connect Four board (and its number of actions).
pub const COLS: usize = 7;
/// Bits per column in the bitboards: the rows and one always-empty guard bit, so
/// that shifts never carry a line from one column into the next.
const STRIDE: usize = ROWS + 1;

/// Connect Four on a 6 × 7 board: players drop stones into columns in turn; four in
/// a row, column or diagonal wins; a full board with no line is a draw.
///
/// Two bitboards (one per player, bit `column · 7 + row`, row 0 at the bottom) and
/// the height of each column.
///
/// The observation is `f32[2, 6, 7]`: plane 0 the stones of the player to move,
/// plane 1 the opponent's, `obs[p·42 + r·7 + c]` with row `r = 0` at the bottom.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConnectFour {
    stones: [u64; 2],
    heights: [u8; COLS],
    moves: usize,
    outcome: Option<Outcome>,
}

impl Default for ConnectFour {
    fn default() -> Self {
        ConnectFour::new()
    }
}

/// Whether the bitboard `b` holds four in a line.
fn has_four(b: u64) -> bool {
    // Vertical (1), horizontal (7), the two diagonals (6 and 8): a line of four is
    // two overlapping pairs two steps apart.
    [1, STRIDE, STRIDE - 1, STRIDE + 1].iter().any(|&s| {
        let pairs = b & (b >> s);
        pairs & (pairs >> (2 * s)) != 0
    })
}

impl ConnectFour {
    /// The empty board, player 0 to move.
    pub fn new() -> ConnectFour {
        ConnectFour {
            stones: [0; 2],
            heights: [0; COLS],
            moves: 0,
            outcome: None,
        }
    }

    /// The board after playing `moves` (columns) from the empty one.
    ///
    /// # Errors
    /// The first move's error ([`Error::InvalidAction`], [`Error::GameOver`]).
    pub fn from_moves(moves: &[usize]) -> Result<ConnectFour> {
        let mut g = ConnectFour::new();
        for &m in moves {
            g.play(m)?;
        }
        Ok(g)
    }

    /// The number of moves played.
    pub fn moves(&self) -> usize {
        self.moves
    }

    /// The stone at `(row, col)` (row 0 at the bottom): `Some(player)` or `None`
    /// for an empty cell or one off the board.
    pub fn cell(&self, row: usize, col: usize) -> Option<usize> {
        if row >= ROWS || col >= COLS {
            return None;
        }
        let bit = 1u64 << (col * STRIDE + row);
        (0..2).find(|&p| self.stones[p] & bit != 0)
    }
}

impl TwoPlayerGame for ConnectFour {
    fn num_actions(&self) -> usize {
        COLS
    }

    fn observation_dims(&self) -> Vec<i64> {
        vec![2, ROWS as i64, COLS as i64]
    }

    fn current_player(&self) -> usize {
        self.moves % 2
    }

    fn is_legal(&self, action: usize) -> bool {
        self.outcome.is_none() && action < COLS && (self.heights[action] as usize) < ROWS
    }

    fn play(&mut self, action: usize) -> Result<()> {
        if let Some(outcome) = self.outcome {
            return Err(Error::GameOver {
                game: "ConnectFour",
                outcome: outcome.to_string(),
                moves: self.moves,
            });
        }
        if action >= COLS {
            return Err(Error::InvalidAction {
                what: "ConnectFour::play (a column)".into(),
                action: action as i64,
                actions: COLS,
            });
        }
        let h = self.heights[action] as usize;
        if h >= ROWS {
            return Err(Error::InvalidAction {
                what: format!("ConnectFour::play: column {action} is full"),
                action: action as i64,
                actions: COLS,
            });
        }
        let p = self.current_player();
        self.stones[p] |= 1u64 << (action * STRIDE + h);
        self.heights[action] += 1;
        self.moves += 1;
        if has_four(self.stones[p]) {
            self.outcome = Some(Outcome::Win(p));
        } else if self.moves == ROWS * COLS {
            self.outcome = Some(Outcome::Draw);
        }
        Ok(())
    }

    fn outcome(&self) -> Option<Outcome> {
        self.outcome
    }

    fn observe(&self, out: &mut [f32]) -> Result<()> {
        let n = 2 * ROWS * COLS;
        if out.len() != n {
            return Err(Error::Length {
                what: "ConnectFour::observe: observation values (f32[2, 6, 7])".into(),
                given: out.len(),
                expected: n,
            });
        }
        let me = self.current_player();
        for (plane, player) in [me, 1 - me].into_iter().enumerate() {
            for r in 0..ROWS {
                for c in 0..COLS {
                    let bit = 1u64 << (c * STRIDE + r);
                    out[plane * ROWS * COLS + r * COLS + c] = if self.stones[player] & bit != 0 {
                        1.0
                    } else {
                        0.0
                    };
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for ConnectFour {
    /// The board, top row first: `X` player 0, `O` player 1, `.` empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in (0..ROWS).rev() {
            for c in 0..COLS {
                let ch = match self.cell(r, c) {
                    Some(0) => 'X',
                    Some(_) => 'O',
                    None => '.',
                };
                write!(f, "{ch}")?;
            }
            writeln!(f)?;
        }
        write!(f, "0123456")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An independent reference: scan every cell for four equal stones in each of
    /// the four directions, on the array the cells give.
    fn winner_by_scan(g: &ConnectFour) -> Option<usize> {
        let dirs: [(i64, i64); 4] = [(0, 1), (1, 0), (1, 1), (1, -1)];
        for r in 0..ROWS as i64 {
            for c in 0..COLS as i64 {
                let Some(p) = g.cell(r as usize, c as usize) else {
                    continue;
                };
                for (dr, dc) in dirs {
                    let all = (1..4).all(|k| {
                        let (rr, cc) = (r + k * dr, c + k * dc);
                        rr >= 0 && cc >= 0 && g.cell(rr as usize, cc as usize) == Some(p)
                    });
                    if all {
                        return Some(p);
                    }
                }
            }
        }
        None
    }

    #[test]
    fn vertical_horizontal_and_diagonal_wins() -> Result<()> {
        // Column: player 0 in column 0 four times.
        let g = ConnectFour::from_moves(&[0, 1, 0, 1, 0, 1, 0])?;
        assert_eq!(g.outcome(), Some(Outcome::Win(0)));
        // Row: player 0 along the bottom, player 1 stacked on top of it.
        let g = ConnectFour::from_moves(&[0, 0, 1, 1, 2, 2])?;
        assert_eq!(g.outcome(), None, "{g}");
        let g = ConnectFour::from_moves(&[0, 0, 1, 1, 2, 2, 3])?;
        assert_eq!(winner_by_scan(&g), Some(0), "{g}");
        assert_eq!(g.outcome(), Some(Outcome::Win(0)), "{g}");
        // Row for player 1 in the last four columns.
        let g = ConnectFour::from_moves(&[0, 3, 0, 4, 1, 5, 1])?;
        assert_eq!(g.outcome(), None, "{g}");
        let g = ConnectFour::from_moves(&[0, 3, 0, 4, 1, 5, 1, 6])?;
        assert_eq!(g.outcome(), Some(Outcome::Win(1)), "{g}");
        // Diagonal "/": player 0 at (0,0), (1,1), (2,2), (3,3).
        let g = ConnectFour::from_moves(&[0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3])?;
        assert_eq!(g.outcome(), Some(Outcome::Win(0)), "{g}");
        // Diagonal "\": player 0 at (3,0), (2,1), (1,2), (0,3).
        let g = ConnectFour::from_moves(&[3, 2, 2, 1, 1, 0, 1, 0, 0, 6, 0])?;
        assert_eq!(g.outcome(), Some(Outcome::Win(0)), "{g}");
        Ok(())
    }

    #[test]
    fn no_win_across_the_column_guard() -> Result<()> {
        // Stones at the top of column 0 and the bottom of column 1 are adjacent bits
        // only through the guard bit: no vertical line may wrap.
        let g = ConnectFour::from_moves(&[0, 0, 0, 0, 0, 1, 0, 1, 1, 2, 1])?;
        assert_eq!(g.outcome(), winner_by_scan(&g).map(Outcome::Win), "{g}");
        Ok(())
    }

    #[test]
    fn random_games_agree_with_a_cell_scan() -> Result<()> {
        let mut rng = crate::Rng::new(11);
        let mut draws = 0;
        for _ in 0..2000 {
            let mut g = ConnectFour::new();
            while g.outcome().is_none() {
                let legal = g.legal_actions();
                let a = legal[rng.below(legal.len() as u64)? as usize];
                g.play(a)?;
                // Before the game ends no line may exist; when it ends with a win,
                // the mover's line is there.
                match g.outcome() {
                    None => assert_eq!(winner_by_scan(&g), None, "{g}"),
                    Some(Outcome::Win(p)) => assert_eq!(winner_by_scan(&g), Some(p), "{g}"),
                    Some(Outcome::Draw) => {
                        draws += 1;
                        assert_eq!(g.moves(), 42);
                        assert_eq!(winner_by_scan(&g), None);
                    }
                }
            }
        }
        // Random play rarely fills the board (the dedicated test below checks a
        // draw); most games end with a win.
        assert!(draws < 100, "{draws} draws in 2000 random games");
        Ok(())
    }

    #[test]
    fn a_full_board_without_a_line_is_a_draw() -> Result<()> {
        // A drawn game found by random play with a plain-Python cell scan (the
        // 486th game of `random.seed(1)`); checked here against `winner_by_scan`
        // after every move.
        let moves = [
            4, 3, 6, 0, 1, 4, 5, 5, 1, 1, 5, 0, 1, 6, 0, 1, 5, 5, 1, 0, 4, 6, 3, 2, 6, 6, 0, 4, 6,
            5, 2, 0, 4, 2, 4, 2, 2, 2, 3, 3, 3, 3,
        ];
        let mut g = ConnectFour::new();
        for m in moves {
            g.play(m)?;
            assert_eq!(winner_by_scan(&g), None, "{g}");
        }
        assert_eq!(g.outcome(), Some(Outcome::Draw), "{g}");
        assert!(g.legal_actions().is_empty());
        assert!(matches!(g.play(0), Err(Error::GameOver { moves: 42, .. })));
        Ok(())
    }

    #[test]
    fn illegal_moves_are_errors_and_change_nothing() -> Result<()> {
        let mut g = ConnectFour::from_moves(&[2, 2, 2, 2, 2, 2])?;
        let before = g.clone();
        let e = g.play(2).unwrap_err();
        assert!(e.to_string().contains("column 2 is full"), "{e}");
        let e = g.play(7).unwrap_err();
        assert!(matches!(e, Error::InvalidAction { action: 7, .. }), "{e}");
        assert_eq!(g, before);
        assert!(!g.is_legal(2) && g.is_legal(3));
        assert_eq!(g.legal_actions(), vec![0, 1, 3, 4, 5, 6]);
        let mut won = ConnectFour::from_moves(&[0, 1, 0, 1, 0, 1, 0])?;
        let e = won.play(3).unwrap_err();
        assert!(matches!(e, Error::GameOver { moves: 7, .. }), "{e}");
        assert!(e.to_string().contains("player 0 won"), "{e}");
        assert!(won.legal_actions().is_empty());
        Ok(())
    }

    #[test]
    fn observation_is_from_the_movers_point_of_view() -> Result<()> {
        let g = ConnectFour::from_moves(&[3])?; // player 1 to move
        let obs = g.observation();
        assert_eq!(obs.len(), 84);
        // Player 0's stone at row 0, column 3 is the opponent's for the mover.
        assert_eq!(obs[3], 0.0);
        assert_eq!(obs[42 + 3], 1.0);
        assert_eq!(obs.iter().sum::<f32>(), 1.0);
        let g = ConnectFour::from_moves(&[3, 4])?; // player 0 to move
        let obs = g.observation();
        assert_eq!((obs[3], obs[42 + 4]), (1.0, 1.0));
        let mut short = [0.0; 5];
        assert!(g.observe(&mut short).is_err());
        Ok(())
    }
}

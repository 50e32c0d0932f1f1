//! Planning agents written as `async` code (Alpacka's agents): [`ShootingAgent`]
//! (random shooting in copies of an [`Environment`], leaves scored by the
//! network's value) and [`MctsAgent`] (AlphaZero's PUCT search on a
//! [`TwoPlayerGame`] with the network's prior and value).
//!
//! An agent asks for predictions through an evaluator: any function from an
//! observation to a future of the network's output row, typically
//! `|obs| net.predict(obs)` with the [`NetHandle`](crate::NetHandle) a
//! [`Stepper`](crate::Stepper) gave it. In a stepper, every prediction an agent
//! awaits in one tick goes into that tick's single batched call, with every other
//! agent's: the shooting agent sends all the leaves of one decision at once
//! (`join_all`), the MCTS agent one leaf per simulation (so `n` agents searching
//! make one call of `n` rows per tick).
//!
//! Network outputs: the MCTS agent reads rows `[logits (A), value]` (the value in
//! `[-1, 1]` from the side of the player to move, as
//! [`policy_value_loss`](crate::trainer::policy_value_loss) trains it); the
//! shooting agent reads the value at [`ShootingConfig::value_index`].

use std::future::Future;

use futures::future::join_all;

use crate::connect_four::{Outcome, TwoPlayerGame};
use crate::env::{Environment, Rng};
use crate::error::{Error, Result};

/// A standard normal draw (Box–Muller on two uniforms).
fn normal(rng: &mut Rng) -> f64 {
    let u1 = (1.0 - rng.uniform() as f64).max(f64::MIN_POSITIVE);
    let u2 = rng.uniform() as f64;
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// A Gamma(`alpha`, 1) draw (Marsaglia and Tsang; for `alpha < 1`, Gamma(α+1)·U^(1/α)).
fn gamma(rng: &mut Rng, alpha: f64) -> f64 {
    if alpha < 1.0 {
        let u = (rng.uniform() as f64).max(f64::MIN_POSITIVE);
        return gamma(rng, alpha + 1.0) * u.powf(1.0 / alpha);
    }
    let d = alpha - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = (rng.uniform() as f64).max(f64::MIN_POSITIVE);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// A Dirichlet(`alpha`, …, `alpha`) draw of `n` components.
pub fn dirichlet(rng: &mut Rng, alpha: f64, n: usize) -> Vec<f64> {
    let g: Vec<f64> = (0..n).map(|_| gamma(rng, alpha)).collect();
    let s: f64 = g.iter().sum();
    if s > 0.0 {
        g.iter().map(|x| x / s).collect()
    } else {
        vec![1.0 / n as f64; n]
    }
}

/// The MCTS agent's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct MctsConfig {
    /// Simulations (leaf evaluations or terminal leaves) per move.
    pub simulations: usize,
    /// The exploration constant of PUCT: `c · P(a) · √N / (1 + N(a))`.
    pub c_puct: f32,
    /// The Dirichlet concentration of the root noise.
    pub dirichlet_alpha: f32,
    /// The weight of the Dirichlet noise mixed into the root's prior (0: none).
    pub noise_fraction: f32,
    /// The temperature of the move choice: 0 plays the most visited move (the
    /// lowest action among ties), `T > 0` samples with probability ∝ `N(a)^(1/T)`.
    pub temperature: f32,
}

impl Default for MctsConfig {
    /// 64 simulations, `c = 1.5`, no noise (α = 1 when enabled), greedy.
    fn default() -> Self {
        MctsConfig {
            simulations: 64,
            c_puct: 1.5,
            dirichlet_alpha: 1.0,
            noise_fraction: 0.0,
            temperature: 0.0,
        }
    }
}

impl MctsConfig {
    fn check(&self) -> Result<()> {
        let bad = |what: &'static str, reason: String| Err(Error::InvalidArgument { what, reason });
        if self.simulations == 0 {
            return bad(
                "simulations",
                "MctsConfig: simulations must be at least 1".into(),
            );
        }
        if !(self.c_puct.is_finite() && self.c_puct >= 0.0) {
            return bad(
                "c_puct",
                format!(
                    "MctsConfig: c_puct = {}; must be finite and >= 0",
                    self.c_puct
                ),
            );
        }
        if !(0.0..=1.0).contains(&self.noise_fraction) {
            return bad(
                "noise_fraction",
                format!(
                    "MctsConfig: noise_fraction = {}; must be in [0, 1]",
                    self.noise_fraction
                ),
            );
        }
        if self.noise_fraction > 0.0
            && !(self.dirichlet_alpha > 0.0 && self.dirichlet_alpha.is_finite())
        {
            return bad(
                "dirichlet_alpha",
                format!(
                    "MctsConfig: dirichlet_alpha = {}; must be > 0",
                    self.dirichlet_alpha
                ),
            );
        }
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad(
                "temperature",
                format!(
                    "MctsConfig: temperature = {}; must be finite and >= 0",
                    self.temperature
                ),
            );
        }
        Ok(())
    }
}

/// One node of the search tree: the edge statistics of the move that led to it.
#[derive(Clone, Debug)]
struct Node {
    action: usize,
    prior: f32,
    visits: u32,
    /// Sum of the values backed up through it, from the side of the player who
    /// made `action` (the parent's player to move).
    value_sum: f32,
    children: Vec<usize>,
    expanded: bool,
}

impl Node {
    fn new(action: usize, prior: f32) -> Node {
        Node {
            action,
            prior,
            visits: 0,
            value_sum: 0.0,
            children: Vec::new(),
            expanded: false,
        }
    }

    fn q(&self) -> f32 {
        if self.visits == 0 {
            0.0
        } else {
            self.value_sum / self.visits as f32
        }
    }
}

/// What one search found at the root.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchResult {
    /// The move chosen (by the temperature).
    pub action: usize,
    /// Visits of each action at the root (`0` for illegal ones), `num_actions` long.
    pub visits: Vec<u32>,
    /// The visits as a distribution (the policy target AlphaZero trains on).
    pub policy: Vec<f32>,
    /// The root's value estimate from the side of the player to move: the
    /// visit-weighted mean of its children's values.
    pub value: f32,
    /// Predictions made (leaf evaluations; terminal leaves need none).
    pub predictions: usize,
}

/// AlphaZero-style MCTS with PUCT over a [`TwoPlayerGame`]: see the [module
/// docs](self). Each simulation descends from the root by `argmax Q + U` (the first
/// of equals), evaluates the leaf (the game's outcome if it is terminal, else one
/// prediction: the prior is the softmax of the legal actions' logits and the value
/// the network's), expands it and backs the value up, negated at each level.
#[derive(Clone, Debug)]
pub struct MctsAgent {
    config: MctsConfig,
    rng: Rng,
}

/// The value of a finished game for `player`.
fn outcome_value(outcome: Outcome, player: usize) -> f32 {
    match outcome {
        Outcome::Win(p) if p == player => 1.0,
        Outcome::Win(_) => -1.0,
        Outcome::Draw => 0.0,
    }
}

impl MctsAgent {
    /// An agent with `config`, drawing noise and temperature samples from `seed`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a setting out of range.
    pub fn new(config: MctsConfig, seed: u64) -> Result<MctsAgent> {
        config.check()?;
        Ok(MctsAgent {
            config,
            rng: Rng::new(seed),
        })
    }

    /// The settings.
    pub fn config(&self) -> &MctsConfig {
        &self.config
    }

    /// The settings, to change between moves (e.g. the temperature after the
    /// opening).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a setting out of range (the old ones stay).
    pub fn set_config(&mut self, config: MctsConfig) -> Result<()> {
        config.check()?;
        self.config = config;
        Ok(())
    }

    /// Expands `node` with the legal actions of `game`, the prior the softmax of
    /// their logits from `row`; returns the value from `row`.
    fn expand<G: TwoPlayerGame>(
        tree: &mut Vec<Node>,
        node: usize,
        game: &G,
        row: &[f32],
    ) -> Result<f32> {
        let a_n = game.num_actions();
        if row.len() != a_n + 1 {
            return Err(Error::Length {
                what: format!(
                    "MctsAgent: the network's output row ([logits of {a_n} actions, value])"
                ),
                given: row.len(),
                expected: a_n + 1,
            });
        }
        let legal = game.legal_actions();
        let max = legal
            .iter()
            .map(|&a| row[a])
            .fold(f32::NEG_INFINITY, f32::max);
        let exps: Vec<f32> = legal.iter().map(|&a| (row[a] - max).exp()).collect();
        let total: f32 = exps.iter().sum();
        for (&a, e) in legal.iter().zip(exps) {
            let id = tree.len();
            let prior = if total > 0.0 && total.is_finite() {
                e / total
            } else {
                1.0 / legal.len() as f32
            };
            tree.push(Node::new(a, prior));
            tree[node].children.push(id);
        }
        tree[node].expanded = true;
        Ok(row[a_n])
    }

    fn select(&self, tree: &[Node], node: usize) -> usize {
        let n = &tree[node];
        let sqrt_n = (n.visits.max(1) as f32).sqrt();
        let mut best = n.children[0];
        let mut best_score = f32::NEG_INFINITY;
        for &c in &n.children {
            let ch = &tree[c];
            let u = self.config.c_puct * ch.prior * sqrt_n / (1.0 + ch.visits as f32);
            let score = ch.q() + u;
            if score > best_score {
                best_score = score;
                best = c;
            }
        }
        best
    }

    /// Searches from `game` with `config.simulations` simulations, each leaf
    /// evaluated by `evaluate` (an observation in, the output row out), and
    /// chooses a move: [`start`](Self::start) driven to the end, awaiting each
    /// leaf's evaluation.
    ///
    /// # Errors
    /// [`Error::GameOver`] when the game has ended; [`Error::Length`] for an
    /// output row that is not `num_actions + 1` long; the evaluator's error.
    pub async fn search<G, F, Fut>(&mut self, game: &G, evaluate: F) -> Result<SearchResult>
    where
        G: TwoPlayerGame,
        F: Fn(Vec<f32>) -> Fut,
        Fut: Future<Output = Result<Vec<f32>>>,
    {
        let mut search = self.start(game)?;
        while let Some(obs) = search.next_leaf()? {
            let row = evaluate(obs).await?;
            search.give(&row)?;
        }
        search.finish()
    }

    /// The same search as a state machine, for callers that batch leaves
    /// themselves (a plain loop over many games): [`Search::next_leaf`] runs
    /// simulations until one needs an evaluation and returns its observation,
    /// [`Search::give`] takes the network's row for it, [`Search::finish`]
    /// chooses the move.
    ///
    /// # Errors
    /// [`Error::GameOver`] when the game has ended.
    pub fn start<G: TwoPlayerGame>(&mut self, game: &G) -> Result<Search<'_, G>> {
        if let Some(outcome) = game.outcome() {
            return Err(Error::GameOver {
                game: "MctsAgent::search",
                outcome: outcome.to_string(),
                moves: 0,
            });
        }
        Ok(Search {
            agent: self,
            root: game.clone(),
            tree: vec![Node::new(usize::MAX, 1.0)],
            done: 0,
            pending: None,
            predictions: 0,
        })
    }

    fn add_noise(&mut self, tree: &mut [Node]) {
        let children = tree[0].children.clone();
        let noise = dirichlet(
            &mut self.rng,
            self.config.dirichlet_alpha as f64,
            children.len(),
        );
        let f = self.config.noise_fraction;
        for (c, eta) in children.into_iter().zip(noise) {
            tree[c].prior = (1.0 - f) * tree[c].prior + f * eta as f32;
        }
    }

    fn choose(&mut self, visits: &[u32], legal: &[usize]) -> Result<usize> {
        let Some(&first) = legal.first() else {
            return Err(Error::InvalidArgument {
                what: "game",
                reason: "MctsAgent: no legal action".into(),
            });
        };
        if self.config.temperature == 0.0 {
            return Ok(legal
                .iter()
                .copied()
                .fold(first, |b, a| if visits[a] > visits[b] { a } else { b }));
        }
        let max = legal.iter().map(|&a| visits[a]).max().unwrap_or(0).max(1) as f64;
        let inv_t = 1.0 / self.config.temperature as f64;
        let weights: Vec<f64> = legal
            .iter()
            .map(|&a| (visits[a] as f64 / max).powf(inv_t))
            .collect();
        let total: f64 = weights.iter().sum();
        if !(total > 0.0 && total.is_finite()) {
            return Ok(first);
        }
        let mut x = self.rng.uniform() as f64 * total;
        for (&a, w) in legal.iter().zip(&weights) {
            if x < *w {
                return Ok(a);
            }
            x -= w;
        }
        Ok(legal[legal.len() - 1])
    }
}

/// An MCTS search in progress (see [`MctsAgent::start`]).
pub struct Search<'a, G> {
    agent: &'a mut MctsAgent,
    root: G,
    tree: Vec<Node>,
    /// Simulations finished.
    done: usize,
    /// The leaf waiting for its evaluation: its path from the root and its game.
    pending: Option<(Vec<usize>, G)>,
    predictions: usize,
}

impl<G> std::fmt::Debug for Search<'_, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Search")
            .field("nodes", &self.tree.len())
            .field("done", &self.done)
            .field("waiting", &self.pending.is_some())
            .finish_non_exhaustive()
    }
}

impl<G: TwoPlayerGame> Search<'_, G> {
    /// Backs `value` (from the side of the player to move at the path's last
    /// node) up the path, negated at each level.
    fn backup(&mut self, path: &[usize], value: f32) {
        let mut v = -value;
        for &n in path.iter().rev() {
            self.tree[n].visits += 1;
            self.tree[n].value_sum += v;
            v = -v;
        }
        self.done += 1;
    }

    /// Runs simulations until one reaches a leaf that needs the network, and
    /// returns that leaf's observation; `None` once all simulations are done.
    /// Terminal leaves are scored by the game's outcome without the network.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the previous leaf's row was not given.
    pub fn next_leaf(&mut self) -> Result<Option<Vec<f32>>> {
        if self.pending.is_some() {
            return Err(Error::InvalidArgument {
                what: "self",
                reason: "Search::next_leaf: the previous leaf waits for its row (Search::give)"
                    .into(),
            });
        }
        while self.done < self.agent.config.simulations {
            let mut g = self.root.clone();
            let mut path = vec![0usize];
            let mut node = 0;
            while self.tree[node].expanded && g.outcome().is_none() {
                node = self.agent.select(&self.tree, node);
                g.play(self.tree[node].action)?;
                path.push(node);
            }
            match g.outcome() {
                Some(o) => {
                    let v = outcome_value(o, g.current_player());
                    self.backup(&path, v);
                }
                None => {
                    let obs = g.observation();
                    self.pending = Some((path, g));
                    return Ok(Some(obs));
                }
            }
        }
        Ok(None)
    }

    /// Gives the network's output row for the leaf [`next_leaf`](Self::next_leaf)
    /// returned: the leaf is expanded with its prior and its value backed up.
    ///
    /// # Errors
    /// [`Error::Length`] for a row that is not `num_actions + 1` long,
    /// [`Error::InvalidArgument`] when no leaf waits.
    pub fn give(&mut self, row: &[f32]) -> Result<()> {
        let Some((path, g)) = self.pending.take() else {
            return Err(Error::InvalidArgument {
                what: "row",
                reason: "Search::give: no leaf waits for a row (call Search::next_leaf)".into(),
            });
        };
        let node = path[path.len() - 1];
        let v = match MctsAgent::expand(&mut self.tree, node, &g, row) {
            Ok(v) => v,
            Err(e) => {
                self.pending = Some((path, g));
                return Err(e);
            }
        };
        self.predictions += 1;
        if node == 0 && self.agent.config.noise_fraction > 0.0 {
            self.agent.add_noise(&mut self.tree);
        }
        self.backup(&path, v);
        Ok(())
    }

    /// The visit counts at the root and the move chosen by the temperature.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when simulations remain or a leaf waits.
    pub fn finish(self) -> Result<SearchResult> {
        if self.pending.is_some() || self.done < self.agent.config.simulations {
            return Err(Error::InvalidArgument {
                what: "self",
                reason: format!(
                    "Search::finish: {} of {} simulations done",
                    self.done, self.agent.config.simulations
                ),
            });
        }
        let a_n = self.root.num_actions();
        let mut visits = vec![0u32; a_n];
        let mut value_sum = 0.0;
        let mut child_visits = 0u32;
        for &c in &self.tree[0].children {
            visits[self.tree[c].action] = self.tree[c].visits;
            value_sum += self.tree[c].value_sum;
            child_visits += self.tree[c].visits;
        }
        let total: u32 = visits.iter().sum();
        let policy: Vec<f32> = visits
            .iter()
            .map(|&v| {
                if total > 0 {
                    v as f32 / total as f32
                } else {
                    0.0
                }
            })
            .collect();
        let action = self.agent.choose(&visits, &self.root.legal_actions())?;
        Ok(SearchResult {
            action,
            visits,
            policy,
            value: if child_visits > 0 {
                value_sum / child_visits as f32
            } else {
                0.0
            },
            predictions: self.predictions,
        })
    }
}

/// The shooting agent's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ShootingConfig {
    /// Random rollouts per first action.
    pub rollouts: usize,
    /// Steps per rollout (the first action included).
    pub depth: usize,
    /// The discount of rewards within a rollout and of the leaf's value.
    pub discount: f32,
    /// Which value of the network's output row scores a leaf.
    pub value_index: usize,
}

impl Default for ShootingConfig {
    /// 16 rollouts of depth 16, discount 0.99, value at index 0.
    fn default() -> Self {
        ShootingConfig {
            rollouts: 16,
            depth: 16,
            discount: 0.99,
            value_index: 0,
        }
    }
}

/// What one shooting decision found.
#[derive(Clone, Debug, PartialEq)]
pub struct ShootingResult {
    /// The action with the best mean return (the lowest among equals).
    pub action: usize,
    /// The mean return of each first action.
    pub returns: Vec<f32>,
    /// Predictions made (one per rollout that did not end the episode).
    pub predictions: usize,
}

/// Alpacka's `ShootingAgent`: for each action, `rollouts` random rollouts of
/// `depth` steps in clones of the environment (the first step takes that action,
/// the rest uniform random ones), each scored by its discounted rewards plus the
/// discounted network value of its last observation (none where the episode
/// ended); the action with the highest mean score is taken. All the leaves of one
/// decision are sent together (`join_all`), so a stepper runs them in one call.
#[derive(Clone, Debug)]
pub struct ShootingAgent {
    config: ShootingConfig,
    rng: Rng,
}

impl ShootingAgent {
    /// An agent with `config`, drawing its random actions from `seed`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no rollouts, a depth of 0 or a discount
    /// outside `[0, 1]`.
    pub fn new(config: ShootingConfig, seed: u64) -> Result<ShootingAgent> {
        if config.rollouts == 0 || config.depth == 0 {
            return Err(Error::InvalidArgument {
                what: "config",
                reason: format!(
                    "ShootingConfig: rollouts = {}, depth = {}; both must be at least 1",
                    config.rollouts, config.depth
                ),
            });
        }
        if !(0.0..=1.0).contains(&config.discount) {
            return Err(Error::InvalidArgument {
                what: "discount",
                reason: format!(
                    "ShootingConfig: discount = {}; must be in [0, 1]",
                    config.discount
                ),
            });
        }
        Ok(ShootingAgent {
            config,
            rng: Rng::new(seed),
        })
    }

    /// The settings.
    pub fn config(&self) -> &ShootingConfig {
        &self.config
    }

    /// Scores every action of `env` by random shooting (see the type's docs) and
    /// picks the best; `env` itself is not stepped.
    ///
    /// # Errors
    /// An environment's step error, [`Error::Length`] for an output row too short
    /// for `value_index`; the evaluator's error.
    pub async fn plan<E, F, Fut>(&mut self, env: &E, evaluate: F) -> Result<ShootingResult>
    where
        E: Environment + Clone,
        F: Fn(Vec<f32>) -> Fut,
        Fut: Future<Output = Result<Vec<f32>>>,
    {
        let a_n = env.num_actions();
        let c = &self.config;
        // Per rollout: its first action, the discounted return so far and, when the
        // episode did not end, the leaf's observation and discount.
        let mut partial = Vec::with_capacity(a_n * c.rollouts);
        let mut leaves = Vec::new();
        for first in 0..a_n {
            for _ in 0..c.rollouts {
                let mut sim = env.clone();
                let mut ret = 0.0f32;
                let mut disc = 1.0f32;
                let mut ended = false;
                for step in 0..c.depth {
                    let a = if step == 0 {
                        first
                    } else {
                        self.rng.below(a_n as u64)? as usize
                    };
                    let t = sim.step(a)?;
                    ret += disc * t.reward;
                    disc *= c.discount;
                    if t.terminal {
                        ended = true;
                        break;
                    }
                }
                if ended {
                    partial.push((first, ret, None));
                } else {
                    partial.push((first, ret, Some(leaves.len())));
                    leaves.push((sim.observation(), disc));
                }
            }
        }
        let rows = join_all(leaves.iter().map(|(obs, _)| evaluate(obs.clone()))).await;
        let mut values = Vec::with_capacity(rows.len());
        for row in rows {
            let row = row?;
            let Some(&v) = row.get(c.value_index) else {
                return Err(Error::Length {
                    what: format!(
                        "ShootingAgent: the network's output row (value_index {})",
                        c.value_index
                    ),
                    given: row.len(),
                    expected: c.value_index + 1,
                });
            };
            values.push(v);
        }
        let mut sums = vec![0.0f32; a_n];
        for (first, ret, leaf) in &partial {
            let tail = leaf.map_or(0.0, |i| leaves[i].1 * values[i]);
            sums[*first] += ret + tail;
        }
        let returns: Vec<f32> = sums.iter().map(|s| s / c.rollouts as f32).collect();
        let action = (0..a_n).fold(0, |b, a| if returns[a] > returns[b] { a } else { b });
        Ok(ShootingResult {
            action,
            returns,
            predictions: leaves.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;
    use crate::connect_four::ConnectFour;

    /// The uniform prior and zero value: logits all 0, value 0.
    async fn uniform(_: Vec<f32>) -> Result<Vec<f32>> {
        Ok(vec![0.0; 8])
    }

    fn search(agent: &mut MctsAgent, game: &ConnectFour) -> Result<SearchResult> {
        agent
            .search(game, uniform)
            .now_or_never()
            .unwrap_or(Err(Error::PolledAfterCompletion))
    }

    fn agent(simulations: usize) -> MctsAgent {
        MctsAgent::new(
            MctsConfig {
                simulations,
                ..MctsConfig::default()
            },
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn finds_a_win_in_one() -> Result<()> {
        // Player 0 (to move) has three in column 2: playing 2 wins.
        let g = ConnectFour::from_moves(&[2, 5, 2, 5, 2, 6])?;
        let r = search(&mut agent(200), &g)?;
        assert_eq!(r.action, 2, "{r:?}");
        assert!(r.value > 0.5, "{r:?}");
        Ok(())
    }

    #[test]
    fn blocks_a_loss_in_one() -> Result<()> {
        // Player 1 threatens column 4 (three stacked); player 0 must block at 4.
        let g = ConnectFour::from_moves(&[0, 4, 1, 4, 6, 4])?;
        assert_eq!(g.current_player(), 0);
        let r = search(&mut agent(400), &g)?;
        assert_eq!(r.action, 4, "{r:?}");
        Ok(())
    }

    #[test]
    fn more_simulations_concentrate_on_the_winning_move() -> Result<()> {
        let g = ConnectFour::from_moves(&[2, 5, 2, 5, 2, 6])?;
        let share: Vec<f32> = [20, 80, 320]
            .iter()
            .map(|&n| search(&mut agent(n), &g).map(|r| r.policy[2]))
            .collect::<Result<_>>()?;
        assert!(share[0] < share[1] && share[1] < share[2], "{share:?}");
        assert!(share[2] > 0.8, "{share:?}");
        Ok(())
    }

    /// A reference edge: action, prior, visits, value sum (the mover's side), child.
    type RefEdge = (usize, f32, u32, f32, Option<Box<RefNode>>);

    /// An independent reference: the same PUCT rules written recursively, each
    /// node holding its own game, values kept from the side of the player to move.
    struct RefNode {
        game: ConnectFour,
        n: u32,
        children: Vec<RefEdge>,
    }

    fn ref_simulate(node: &mut RefNode, c: f32) -> f32 {
        // Returns the value for the player to move at `node`.
        if let Some(o) = node.game.outcome() {
            node.n += 1;
            return outcome_value(o, node.game.current_player());
        }
        if node.children.is_empty() {
            let legal = node.game.legal_actions();
            let p = 1.0 / legal.len() as f32;
            node.children = legal.into_iter().map(|a| (a, p, 0, 0.0, None)).collect();
            node.n += 1;
            return 0.0;
        }
        let sqrt_n = (node.n.max(1) as f32).sqrt();
        let mut best = 0;
        let mut best_score = f32::NEG_INFINITY;
        for (i, (_, p, n, w, _)) in node.children.iter().enumerate() {
            let q = if *n == 0 { 0.0 } else { w / *n as f32 };
            let s = q + c * p * sqrt_n / (1.0 + *n as f32);
            if s > best_score {
                best_score = s;
                best = i;
            }
        }
        let (a, _, n, w, child) = &mut node.children[best];
        let child = child.get_or_insert_with(|| {
            let mut g = node.game.clone();
            let _ = g.play(*a);
            Box::new(RefNode {
                game: g,
                n: 0,
                children: Vec::new(),
            })
        });
        let v = -ref_simulate(child, c);
        *n += 1;
        *w += v;
        node.n += 1;
        v
    }

    #[test]
    fn visit_counts_match_a_recursive_reference() -> Result<()> {
        for moves in [
            &[][..],
            &[3, 3, 4][..],
            &[2, 5, 2, 5, 2, 6][..],
            &[0, 4, 1, 4, 6, 4][..],
        ] {
            let g = ConnectFour::from_moves(moves)?;
            let sims = 150;
            let r = search(&mut agent(sims), &g)?;
            let mut root = RefNode {
                game: g.clone(),
                n: 0,
                children: Vec::new(),
            };
            for _ in 0..sims {
                ref_simulate(&mut root, 1.5);
            }
            let mut expected = vec![0u32; 7];
            for (a, _, n, _, _) in &root.children {
                expected[*a] = *n;
            }
            assert_eq!(r.visits, expected, "after {moves:?}");
        }
        Ok(())
    }

    #[test]
    fn temperature_and_noise() -> Result<()> {
        let g = ConnectFour::new();
        let mut a = MctsAgent::new(
            MctsConfig {
                simulations: 50,
                temperature: 1.0,
                noise_fraction: 0.25,
                dirichlet_alpha: 0.3,
                ..MctsConfig::default()
            },
            5,
        )?;
        let mut seen = [0usize; 7];
        for _ in 0..60 {
            let r = a
                .search(&g, uniform)
                .now_or_never()
                .unwrap_or(Err(Error::PolledAfterCompletion))?;
            assert_eq!(r.visits.iter().sum::<u32>(), 49);
            seen[r.action] += 1;
        }
        assert!(seen.iter().filter(|&&s| s > 0).count() >= 4, "{seen:?}");
        // Dirichlet draws: components positive, summing to 1, mean 1/n.
        let mut rng = Rng::new(1);
        let mut mean = [0.0f64; 4];
        for _ in 0..4000 {
            let d = dirichlet(&mut rng, 0.5, 4);
            assert!((d.iter().sum::<f64>() - 1.0).abs() < 1e-9);
            for (m, x) in mean.iter_mut().zip(d) {
                *m += x / 4000.0;
            }
        }
        assert!(mean.iter().all(|m| (m - 0.25).abs() < 0.02), "{mean:?}");
        Ok(())
    }

    #[test]
    fn the_state_machine_refuses_calls_out_of_order() -> Result<()> {
        let mut a = agent(3);
        let g = ConnectFour::new();
        let mut s = a.start(&g)?;
        assert!(s.give(&[0.0; 8]).is_err()); // no leaf waits yet
        let obs = s.next_leaf()?;
        assert_eq!(obs.map(|o| o.len()), Some(84));
        assert!(s.next_leaf().is_err()); // the leaf waits for its row
        assert!(matches!(s.give(&[0.0; 3]), Err(Error::Length { .. })));
        s.give(&[0.0; 8])?; // the same leaf, now with a row of the right length
        let mut rows = 1;
        while s.next_leaf()?.is_some() {
            s.give(&[0.0; 8])?;
            rows += 1;
        }
        assert_eq!(rows, 3);
        let r = s.finish()?;
        assert_eq!(r.visits.iter().sum::<u32>(), 2);
        let s = a.start(&g)?;
        assert!(s.finish().is_err()); // no simulation done
        Ok(())
    }

    #[test]
    fn bad_settings_and_finished_games_are_errors() -> Result<()> {
        assert!(
            MctsAgent::new(
                MctsConfig {
                    simulations: 0,
                    ..MctsConfig::default()
                },
                0
            )
            .is_err()
        );
        assert!(
            MctsAgent::new(
                MctsConfig {
                    noise_fraction: 2.0,
                    ..MctsConfig::default()
                },
                0
            )
            .is_err()
        );
        let won = ConnectFour::from_moves(&[0, 1, 0, 1, 0, 1, 0])?;
        assert!(matches!(
            search(&mut agent(5), &won),
            Err(Error::GameOver { .. })
        ));
        let short = |_: Vec<f32>| async { Ok(vec![0.0; 3]) };
        let r = agent(5).search(&ConnectFour::new(), short).now_or_never();
        assert!(
            matches!(r, Some(Err(Error::Length { expected: 8, .. }))),
            "{r:?}"
        );
        assert!(
            ShootingAgent::new(
                ShootingConfig {
                    depth: 0,
                    ..ShootingConfig::default()
                },
                0
            )
            .is_err()
        );
        Ok(())
    }
}

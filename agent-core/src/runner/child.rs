//! The links of a run tree: a child run (an agent used as a tool, `agent_tool.rs`)
//! linked to the tool call of its parent, so that it shares the parent's cancellation,
//! deadline and token and cost caps, and its usage is added to the parent's.
//!
//! Token and cost caps bind the whole tree through a chain of [`Pool`]s, one per run:
//! every LLM call's tokens and cost are added to its run's pool and to every pool
//! above it, while it happens; a child's check before each of its calls looks at every
//! pool above its own, so two children running at once cannot pass their parent's cap
//! together. Each run still checks its own caps on its own `Usage`, which includes its
//! children's once their tool calls return.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::{AgentError, Budget};
use crate::output::AgentOutput;
use crate::usage::{ChildUsage, Usage};

use super::Run;

/// Tokens and cost spent in one run and every run below it, against the run's caps.
///
/// A call of a child run is allowed when its estimate (the run's last call's tokens and
/// cost, the rule a run applies to its own caps) fits under every cap above it, counting
/// what the tree spent and what other calls in flight reserved; the estimate is
/// reserved until the call's real usage replaces it. One lock per tree makes the check
/// and the reservation one step.
#[derive(Debug)]
pub(crate) struct Pool {
    max_tokens: Option<u64>,
    max_cost_usd: Option<f64>,
    /// (tokens, cost in USD) spent, and reserved by calls in flight below.
    spent: Mutex<Spent>,
    parent: Option<Arc<Pool>>,
    /// The tree's lock (the root's, shared by every pool below it).
    tree: Arc<Mutex<()>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Spent {
    tokens: u64,
    cost_usd: f64,
    reserved_tokens: u64,
    reserved_cost_usd: f64,
}

/// A call's estimate, reserved in the pools above a run (see [`Pool::reserve`]).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Reserved {
    tokens: u64,
    cost_usd: f64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pool {
    pub(crate) fn new(
        max_tokens: Option<u64>,
        max_cost_usd: Option<f64>,
        parent: Option<Arc<Pool>>,
    ) -> Arc<Self> {
        let tree = parent
            .as_ref()
            .map_or_else(Arc::default, |p| Arc::clone(&p.tree));
        Arc::new(Self {
            max_tokens,
            max_cost_usd,
            spent: Mutex::new(Spent::default()),
            parent,
            tree,
        })
    }

    fn above(&self) -> impl Iterator<Item = &Pool> {
        std::iter::successors(self.parent.as_deref(), |p| p.parent.as_deref())
    }

    /// Adds one LLM call's tokens and cost (USD) here and to every pool above, and
    /// releases its reservation there.
    pub(crate) fn settle(&self, reserved: Reserved, tokens: u64, cost_usd: f64) {
        let _tree = lock(&self.tree);
        for (i, p) in std::iter::once(self).chain(self.above()).enumerate() {
            let mut spent = lock(&p.spent);
            spent.tokens = spent.tokens.saturating_add(tokens);
            spent.cost_usd += cost_usd;
            if i > 0 {
                spent.reserved_tokens = spent.reserved_tokens.saturating_sub(reserved.tokens);
                spent.reserved_cost_usd = (spent.reserved_cost_usd - reserved.cost_usd).max(0.0);
            }
        }
    }

    /// Reserves a call's estimate (`tokens`, `cost_usd`) in every pool above this one,
    /// or names the first cap above (its parent's, then theirs) that the call would
    /// pass, counting what is spent and reserved there; nothing is reserved then.
    pub(crate) fn reserve(&self, tokens: u64, cost_usd: f64) -> Result<Reserved, Budget> {
        if self.parent.is_none() {
            return Ok(Reserved::default());
        }
        let _tree = lock(&self.tree);
        for p in self.above() {
            let s = *lock(&p.spent);
            if let Some(limit) = p.max_tokens {
                let committed = s.tokens.saturating_add(s.reserved_tokens);
                if s.tokens >= limit || committed.saturating_add(tokens) > limit {
                    return Err(Budget::TotalTokens {
                        limit,
                        used: s.tokens,
                    });
                }
            }
            if let Some(limit) = p.max_cost_usd {
                let committed = s.cost_usd + s.reserved_cost_usd;
                if s.cost_usd >= limit || committed + cost_usd > limit {
                    return Err(Budget::CostUsd {
                        limit,
                        spent: s.cost_usd,
                    });
                }
            }
        }
        for p in self.above() {
            let mut s = lock(&p.spent);
            s.reserved_tokens = s.reserved_tokens.saturating_add(tokens);
            s.reserved_cost_usd += cost_usd;
        }
        Ok(Reserved { tokens, cost_usd })
    }

    /// Gives back a reservation no call used (the call failed without cost, or the run
    /// ended).
    pub(crate) fn release(&self, reserved: Reserved) {
        if reserved == Reserved::default() {
            return;
        }
        self.settle(reserved, 0, 0.0);
    }

    /// Whether this pool or one above caps cost.
    pub(crate) fn caps_cost(&self) -> bool {
        std::iter::once(self)
            .chain(self.above())
            .any(|p| p.max_cost_usd.is_some())
    }
}

/// What a run's tool calls pass to a child run they start.
#[derive(Debug)]
pub(crate) struct RunLink {
    /// The parent run's cancellation tokens (the config's and the run's).
    pub(crate) tokens: Vec<CancellationToken>,
    /// When the parent run must end.
    pub(crate) deadline_at: Option<tokio::time::Instant>,
    /// The parent's `tool_timeout`: a child ends before it (see `agent_tool.rs`).
    pub(crate) tool_timeout: Duration,
    /// The parent run's pool.
    pub(crate) pool: Arc<Pool>,
}

/// One tool call's link to its run: the run's link, and the child runs the call
/// started, with what each spent (added to the parent's usage when the call returns).
#[derive(Debug)]
pub(crate) struct CallLink {
    pub(crate) run: Arc<RunLink>,
    children: Mutex<Vec<ChildUsage>>,
}

impl CallLink {
    pub(crate) fn new(run: Arc<RunLink>) -> Arc<Self> {
        Arc::new(Self {
            run,
            children: Mutex::new(Vec::new()),
        })
    }

    /// Records a child run that ended.
    pub(crate) fn push(&self, child: ChildUsage) {
        self.children
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(child);
    }

    /// The child runs recorded so far, taken.
    pub(crate) fn take(&self) -> Vec<ChildUsage> {
        std::mem::take(&mut *self.children.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl<T: AgentOutput> Run<'_, T> {
    /// The link this run's tool calls pass on (made at its first tool turn; the
    /// deadline is fixed by then).
    pub(super) fn run_link(&mut self) -> Arc<RunLink> {
        if let Some(link) = &self.link {
            return Arc::clone(link);
        }
        let link = Arc::new(RunLink {
            tokens: self.tokens.clone(),
            deadline_at: self.deadline_at,
            tool_timeout: self.cfg.settings.budgets.tool_timeout,
            pool: Arc::clone(&self.pool),
        });
        self.link = Some(Arc::clone(&link));
        link
    }

    /// The check of the caps above this run's own (a child's parent and theirs),
    /// before an LLM call: the call's estimate is reserved there until its usage is
    /// counted ([`count_in_tree`](Self::count_in_tree)).
    pub(super) fn check_tree_budgets(&mut self) -> Result<(), AgentError> {
        // A reservation a call left (it failed without cost) goes back first.
        self.pool.release(std::mem::take(&mut self.reserved));
        match self
            .pool
            .reserve(self.last_call_tokens, self.last_call_cost)
        {
            Ok(reserved) => {
                self.reserved = reserved;
                Ok(())
            }
            Err(budget) => Err(AgentError::BudgetExhausted { budget }),
        }
    }

    /// Counts one LLM call's tokens and cost in this run's pool and every pool above,
    /// in place of its reservation.
    pub(super) fn count_in_tree(&mut self, tokens: u64, cost_usd: f64) {
        let reserved = std::mem::take(&mut self.reserved);
        self.pool.settle(reserved, tokens, cost_usd);
    }

    /// Gives back what the run still holds reserved (at its end).
    pub(super) fn release_reservation(&mut self) {
        self.pool.release(std::mem::take(&mut self.reserved));
    }

    /// Adds what a child run spent to this run's usage: its tokens and cost count
    /// toward this run's caps (the pools counted them already, while they happened);
    /// its LLM calls and tool executions stay its own.
    pub(super) fn add_child(&mut self, child: ChildUsage) {
        let u: &Usage = &child.usage;
        self.usage.input_tokens = self.usage.input_tokens.saturating_add(u.input_tokens);
        self.usage.output_tokens = self.usage.output_tokens.saturating_add(u.output_tokens);
        self.usage.cache_read_tokens = self
            .usage
            .cache_read_tokens
            .saturating_add(u.cache_read_tokens);
        self.usage.cache_write_tokens = self
            .usage
            .cache_write_tokens
            .saturating_add(u.cache_write_tokens);
        if let Some(cost) = u.cost_usd {
            self.cost_usd += cost;
            self.usage.cost_usd = Some(self.cost_usd);
        }
        self.usage.children.push(child);
    }
}

/// The parent link a child run's options carry, if any.
pub(crate) fn parent_of(options: &crate::run_options::RunOptions) -> Option<Arc<CallLink>> {
    let any = Arc::clone(&options.parent.as_ref()?.0);
    any.downcast::<CallLink>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_counts_up_the_chain_and_a_child_sees_its_parents_cap() {
        let root = Pool::new(Some(100), None, None);
        let child = Pool::new(None, None, Some(Arc::clone(&root)));
        let sibling = Pool::new(None, None, Some(Arc::clone(&root)));
        child.settle(Reserved::default(), 60, 0.0);
        let held = child.reserve(10, 0.0).unwrap();
        sibling.settle(Reserved::default(), 20, 0.0);
        // 80 spent and 10 reserved in the tree: a call of 20 would pass 100.
        assert_eq!(
            sibling.reserve(20, 0.0),
            Err(Budget::TotalTokens {
                limit: 100,
                used: 80
            })
        );
        child.release(held);
        assert!(sibling.reserve(20, 0.0).is_ok());
        // The root's own check is on its usage, not on the pools above it (none).
        assert!(root.reserve(1_000, 0.0).is_ok());
    }

    #[test]
    fn a_cost_cap_anywhere_above_binds() {
        let root = Pool::new(None, Some(0.5), None);
        let mid = Pool::new(Some(1_000_000), None, Some(Arc::clone(&root)));
        let leaf = Pool::new(None, None, Some(Arc::clone(&mid)));
        assert!(leaf.caps_cost());
        leaf.settle(Reserved::default(), 10, 0.45);
        assert_eq!(
            leaf.reserve(0, 0.1),
            Err(Budget::CostUsd {
                limit: 0.5,
                spent: 0.45
            })
        );
        assert!(!Pool::new(None, None, None).caps_cost());
    }
}

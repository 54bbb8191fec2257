//! The machine as the engine uses it: one worker pool per compute node of the topology
//! ([`crate::topology`]), its threads bound to that node's CPUs, and the placement of a
//! collection's shards on those pools.
//!
//! A query's shards are searched at once, each on its node's pool ([`Machine::run`]); a
//! shard's writes and segment builds run on threads bound to its node's CPUs
//! ([`Machine::on_pool_cpus`]), so what they allocate is first touched there and Linux's
//! default local-allocation policy puts it in that node's memory. On a one-node machine
//! nothing is bound, a one-shard search runs on the calling thread as before, and a
//! search of several shards runs one of them on the calling thread and the others on the
//! pool.

use std::sync::{Arc, OnceLock};

use sagitta_kernels::sched;

use crate::topology::Topology;

/// How a collection's shards are spread over the compute nodes (a collection setting,
/// kept in its manifest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// Shard `i` on compute node `i mod N`, the nodes taken by ascending id.
    #[default]
    Spread,
    /// Every shard on the node with this id (a node without CPUs this process may use
    /// falls back to [`Placement::Spread`], and the placement says why).
    Node(usize),
}

/// The most a node number in a [`Placement::Node`] may be (Linux's `MAX_NUMNODES` is at
/// most 1,024).
pub const MAX_NODE_ID: usize = 1_023;

impl Placement {
    /// `spread`, or `node:K`.
    pub fn name(self) -> String {
        match self {
            Placement::Spread => "spread".to_string(),
            Placement::Node(id) => format!("node:{id}"),
        }
    }

    /// The inverse of [`Placement::name`]; `None` for anything else.
    pub fn parse(text: &str) -> Option<Placement> {
        if text == "spread" {
            return Some(Placement::Spread);
        }
        let id = text.strip_prefix("node:")?.parse::<usize>().ok()?;
        (id <= MAX_NODE_ID).then_some(Placement::Node(id))
    }
}

/// Where each shard of a collection runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardPlacement {
    /// The pool of each shard (an index into the machine's pools).
    pub pools: Vec<usize>,
    /// The node id of each shard.
    pub nodes: Vec<usize>,
    /// Why the placement differs from the policy's (the node asked for is not usable).
    pub note: Option<String>,
    /// The far memory tier of each shard: the memory-only node nearest its node (by the
    /// distance table, the lower id on a tie); `None` where the machine has none. A
    /// collection whose vectors tier is `far` keeps its full vectors there.
    pub far_nodes: Vec<Option<usize>>,
}

impl ShardPlacement {
    /// The placement as collection info and `sagitta topology --json` report it.
    pub fn to_json(&self, policy: Placement) -> serde_json::Value {
        let shards: Vec<serde_json::Value> = self
            .nodes
            .iter()
            .enumerate()
            .zip(&self.far_nodes)
            .map(|((shard, node), far)| {
                serde_json::json!({"shard": shard, "node": node, "far_node": far})
            })
            .collect();
        serde_json::json!({
            "policy": policy.name(),
            "shards": shards,
            "note": self.note,
        })
    }
}

/// Work for a pool, borrowing from the caller of [`Machine::run`].
pub type Job<'s> = Box<dyn FnOnce() + Send + 's>;

struct Pool {
    node: usize,
    cpus: Vec<usize>,
    /// `None` when the threads could not be started: its jobs run on the calling thread.
    threads: Option<rayon::ThreadPool>,
}

pub struct Machine {
    topology: Topology,
    pools: Vec<Pool>,
}

impl std::fmt::Debug for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pools: Vec<(usize, usize)> = self
            .pools
            .iter()
            .map(|pool| (pool.node, pool.cpus.len()))
            .collect();
        f.debug_struct("Machine")
            .field("topology", &self.topology)
            .field("pools (node, threads)", &pools)
            .finish()
    }
}

impl Machine {
    /// The machine this process runs on ([`Topology::detect`]), made once and shared by
    /// every collection.
    pub fn detected() -> Arc<Machine> {
        static MACHINE: OnceLock<Arc<Machine>> = OnceLock::new();
        Arc::clone(MACHINE.get_or_init(|| Arc::new(Machine::new(Topology::detect()))))
    }

    /// Pools for `topology`'s compute nodes, each of as many threads as the node has CPUs
    /// this process may use; with more than one node each thread is bound to its node's
    /// CPUs. A topology without compute nodes gets one pool over every CPU.
    pub fn new(topology: Topology) -> Machine {
        let mut nodes: Vec<(usize, Vec<usize>)> = topology
            .compute_nodes()
            .map(|node| (node.id, node.cpus.clone()))
            .collect();
        if nodes.is_empty() {
            nodes.push((0, (0..crate::topology::available_cores()).collect()));
        }
        let bind = nodes.len() > 1;
        let pools = nodes
            .into_iter()
            .map(|(node, cpus)| Pool {
                threads: start_pool(node, &cpus, bind),
                node,
                cpus,
            })
            .collect();
        Machine { topology, pools }
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    pub fn pool_count(&self) -> usize {
        self.pools.len()
    }

    /// The node id of pool `pool`.
    pub fn pool_node(&self, pool: usize) -> usize {
        self.pools[pool].node
    }

    /// The threads of pool `pool` (the CPUs of its node this process may use).
    pub fn pool_threads(&self, pool: usize) -> usize {
        self.pools[pool].cpus.len()
    }

    /// The pool and node of each of `shards` shards under `placement`.
    pub fn place(&self, placement: Placement, shards: usize) -> ShardPlacement {
        let nodes: Vec<usize> = self.pools.iter().map(|pool| pool.node).collect();
        with_far_nodes(&self.topology, place_on_nodes(&nodes, placement, shards))
    }

    /// Runs every job on its pool (`(pool, job)`) and returns when all have finished. On a
    /// one-pool machine the calling thread runs one of the jobs itself. A job that panics
    /// makes this panic once all have finished.
    pub fn run<'s>(&self, jobs: Vec<(usize, Job<'s>)>) {
        let mut groups: Vec<Vec<Job<'s>>> = self.pools.iter().map(|_| Vec::new()).collect();
        for (pool, job) in jobs {
            groups[pool].push(job);
        }
        let inline = if self.pools.len() == 1 {
            groups[0].pop()
        } else {
            None
        };
        spawn_nested(&self.pools, groups, inline);
    }

    /// Runs `work` on the calling thread bound to pool `pool`'s CPUs (threads it spawns
    /// inherit the binding), restoring the thread's own binding afterwards. On a
    /// one-pool machine it just runs `work`.
    pub fn on_pool_cpus<R>(&self, pool: usize, work: impl FnOnce() -> R) -> R {
        if self.pools.len() <= 1 {
            return work();
        }
        let _restore = Rebind::to(&self.pools[pool].cpus);
        work()
    }
}

/// Where `shards` shards of a collection with `placement` run on a machine of
/// `topology` (the policy alone, no pools started): one pool per compute node, by
/// ascending node id; a topology without compute nodes is one pool on node 0.
pub fn place(topology: &Topology, placement: Placement, shards: usize) -> ShardPlacement {
    let mut nodes: Vec<usize> = topology.compute_nodes().map(|node| node.id).collect();
    if nodes.is_empty() {
        nodes.push(0);
    }
    with_far_nodes(topology, place_on_nodes(&nodes, placement, shards))
}

/// `placed` with each shard's far tier: the memory-only node nearest the shard's node.
fn with_far_nodes(topology: &Topology, mut placed: ShardPlacement) -> ShardPlacement {
    let position = |id: usize| topology.nodes.iter().position(|node| node.id == id);
    let nearest = |id: usize| {
        let from = position(id).map(|at| &topology.nodes[at].distances);
        topology
            .memory_nodes()
            .map(|far| {
                let distance = from
                    .zip(position(far.id))
                    .and_then(|(row, to)| row.get(to).copied());
                (distance.unwrap_or(u32::MAX), far.id)
            })
            .min()
            .map(|(_, far)| far)
    };
    placed.far_nodes = placed.nodes.iter().map(|&node| nearest(node)).collect();
    placed
}

/// [`place`] over pools on `nodes` (node ids, one per pool, ascending).
fn place_on_nodes(nodes: &[usize], placement: Placement, shards: usize) -> ShardPlacement {
    let spread = |note| {
        let pools: Vec<usize> = (0..shards).map(|shard| shard % nodes.len()).collect();
        let on = pools.iter().map(|&pool| nodes[pool]).collect();
        ShardPlacement {
            pools,
            nodes: on,
            note,
            far_nodes: Vec::new(),
        }
    };
    match placement {
        Placement::Spread => spread(None),
        Placement::Node(id) => match nodes.iter().position(|&node| node == id) {
            Some(pool) => ShardPlacement {
                pools: vec![pool; shards],
                nodes: vec![id; shards],
                note: None,
                far_nodes: Vec::new(),
            },
            None => spread(Some(format!(
                "node {id} has no CPU this process may use; shards spread instead"
            ))),
        },
    }
}

/// A thread bound to other CPUs until dropped (panics included), then bound back.
struct Rebind {
    before: Option<Vec<usize>>,
}

impl Rebind {
    fn to(cpus: &[usize]) -> Rebind {
        let before = sched::allowed_cpus();
        let bound = sched::pin_current_thread(cpus);
        Rebind {
            before: before.filter(|_| bound),
        }
    }
}

impl Drop for Rebind {
    fn drop(&mut self) {
        if let Some(before) = &self.before {
            sched::pin_current_thread(before);
        }
    }
}

fn start_pool(node: usize, cpus: &[usize], bind: bool) -> Option<rayon::ThreadPool> {
    let bound: Vec<usize> = cpus.to_vec();
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(cpus.len().max(1))
        .thread_name(move |index| format!("sagitta-node{node}-{index}"))
        .start_handler(move |_| {
            if bind {
                sched::pin_current_thread(&bound);
            }
        })
        .build();
    match built {
        Ok(pool) => Some(pool),
        Err(error) => {
            log::warn!(
                target: "sagitta::machine",
                "node {node}: worker threads could not start ({error}); its shards are \
                 searched on the calling thread"
            );
            None
        }
    }
}

/// Spawns each group's jobs into its pool, one pool's scope inside the next, so every
/// job may borrow from the caller; `inline` runs on the calling thread innermost, while
/// the pools work.
fn spawn_nested<'s>(pools: &[Pool], mut groups: Vec<Vec<Job<'s>>>, inline: Option<Job<'s>>) {
    let Some(at) = groups.iter().position(|group| !group.is_empty()) else {
        if let Some(job) = inline {
            job();
        }
        return;
    };
    let group = std::mem::take(&mut groups[at]);
    match &pools[at].threads {
        Some(threads) => threads.in_place_scope(|scope| {
            for job in group {
                scope.spawn(move |_| job());
            }
            spawn_nested(pools, groups, inline);
        }),
        None => {
            group.into_iter().for_each(|job| job());
            spawn_nested(pools, groups, inline);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Machine, Placement};
    use crate::topology::Topology;

    #[test]
    fn placement_names_round_trip_and_bad_ones_are_refused() {
        for placement in [Placement::Spread, Placement::Node(0), Placement::Node(7)] {
            assert_eq!(Placement::parse(&placement.name()), Some(placement));
        }
        for bad in [
            "",
            "node",
            "node:",
            "node:x",
            "node:-1",
            "node:1024",
            "Spread",
        ] {
            assert_eq!(Placement::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_job_runs_once_on_any_number_of_pools() {
        for nodes in [1, 2, 3] {
            let machine = Machine::new(Topology::simulated(nodes));
            let counts: Vec<parking_lot::Mutex<usize>> =
                (0..10).map(|_| parking_lot::Mutex::new(0)).collect();
            let jobs = counts
                .iter()
                .enumerate()
                .map(|(index, count)| {
                    let job: super::Job<'_> = Box::new(move || *count.lock() += 1);
                    (index % machine.pool_count(), job)
                })
                .collect();
            machine.run(jobs);
            assert!(
                counts.iter().all(|count| *count.lock() == 1),
                "{nodes} nodes"
            );
        }
    }
}

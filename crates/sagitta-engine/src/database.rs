//! A database: a directory of named collections (`collections/<name>/`) and a manifest that
//! lists them and their aliases. Creating or dropping a collection, or changing aliases,
//! republishes the manifest atomically, so a crash leaves the old list or the new one.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sagitta_storage::fs::{FileSystem, LockGuard};
use sagitta_storage::manifest;

use crate::aliases::{self, AliasAction, Aliases};
use crate::collection::peers::{every_answer, is_silence, Linked, PeerAnswer, PeerCall};
use crate::collection::{
    snapshot, Collection, CollectionConfig, ImportProgress, ImportReport, ImportSource,
};
use crate::error::{EngineError, Result};
use crate::machine::Machine;
pub use crate::names::{check_collection_name, MAX_COLLECTION_NAME_BYTES};
use crate::optimizer::{Optimizer, OptimizerPolicy};
use crate::point::Point;
use crate::spaces::VectorSpaces;

pub struct Database {
    /// First, so dropping the database stops the background thread before anything else.
    optimizer: Option<Optimizer>,
    fs: Arc<dyn FileSystem>,
    root: PathBuf,
    collections: Arc<RwLock<BTreeMap<String, Arc<Collection>>>>,
    /// Alias → collection; changed only while the `collections` write lock is held.
    aliases: RwLock<Aliases>,
    policy: OptimizerPolicy,
    /// See [`DatabaseOptions::stripe_dirs`].
    stripe_dirs: Vec<PathBuf>,
    /// Names being bulk imported: reserved, so no create or second import takes them.
    importing: Mutex<HashSet<String>>,
    /// See [`DatabaseOptions::machine`].
    machine: Arc<Machine>,
    /// See [`DatabaseOptions::peers`].
    peers: Option<Linked>,
    /// Each stripe directory's lock, held as the root's is.
    _stripe_locks: Vec<LockGuard>,
    /// Last: released only after everything else is closed.
    _lock: LockGuard,
}

/// The lock file in a database root: one open database per directory.
pub const LOCK_FILE: &str = "LOCK";

#[derive(Clone, Debug)]
pub struct DatabaseOptions {
    /// Run the optimizer on a background thread (else only explicit `optimize`/`maintain`).
    pub background_optimizer: bool,
    /// The policy every collection starts with.
    pub policy: OptimizerPolicy,
    /// Directories on other devices that collections' records files spread over, besides
    /// the database root (collection `c`'s go under `<dir>/collections/c/`). A database
    /// must be reopened with the same directories in the same order, and a stripe
    /// directory belongs to one database (it is locked while the database is open).
    pub stripe_dirs: Vec<PathBuf>,
    /// The worker pools collections search on; `None`: the detected machine
    /// ([`Machine::detected`]). [`Machine::new`] of a [`crate::topology::Topology::simulated`]
    /// one spreads shards over made-up nodes.
    pub machine: Option<Arc<Machine>>,
    /// Rank 0 of a scale-out job: the other ranks, each holding its own database of the
    /// same collections with the points it owns. Every collection is then linked
    /// ([`Collection::linked`]), and creating or dropping one reaches every rank.
    pub peers: Option<Linked>,
}

impl Default for DatabaseOptions {
    fn default() -> Self {
        DatabaseOptions {
            background_optimizer: true,
            policy: OptimizerPolicy::default(),
            stripe_dirs: Vec::new(),
            machine: None,
            peers: None,
        }
    }
}

impl Database {
    /// Opens (or creates) the database in `root`, opening every listed collection, with
    /// the background optimizer running.
    pub fn open(fs: Arc<dyn FileSystem>, root: &Path) -> Result<Database> {
        Database::open_with(fs, root, DatabaseOptions::default())
    }

    pub fn open_with(
        fs: Arc<dyn FileSystem>,
        root: &Path,
        options: DatabaseOptions,
    ) -> Result<Database> {
        fs.create_dir_all(&root.join("collections"))?;
        let lock = fs.lock_exclusive(&root.join(LOCK_FILE))?;
        // A stripe directory serves one open database: another's open would remove the
        // records files its own manifests do not name.
        let mut stripe_locks = Vec::with_capacity(options.stripe_dirs.len());
        for directory in &options.stripe_dirs {
            fs.create_dir_all(&directory.join("collections"))?;
            stripe_locks.push(fs.lock_exclusive(&directory.join(LOCK_FILE))?);
        }
        let (names, aliases) = match manifest::load(fs.as_ref(), root)? {
            None => (Vec::new(), Aliases::new()),
            Some(bytes) => aliases::parse_manifest(&String::from_utf8(bytes).map_err(|_| {
                EngineError::Corrupt {
                    reason: format!("{}: database manifest is not UTF-8", root.display()),
                }
            })?)?,
        };
        let machine = options.machine.clone().unwrap_or_else(Machine::detected);
        let mut collections = BTreeMap::new();
        for name in names {
            let collection = Collection::open_striped(
                fs.as_ref(),
                &Self::directory(root, &name),
                &stripe_roots(&options.stripe_dirs, &name),
            )?
            .placed_on(Arc::clone(&machine));
            let collection = link(collection, options.peers.as_ref(), &name);
            collection.set_policy(options.policy.clone());
            collections.insert(name, Arc::new(collection));
        }
        let collections = Arc::new(RwLock::new(collections));
        let optimizer = options
            .background_optimizer
            .then(|| Optimizer::start(Arc::clone(&fs), Arc::clone(&collections)));
        Ok(Database {
            optimizer,
            fs,
            root: root.to_path_buf(),
            collections,
            aliases: RwLock::new(aliases),
            policy: options.policy,
            stripe_dirs: options.stripe_dirs,
            importing: Mutex::new(HashSet::new()),
            machine,
            peers: options.peers,
            _stripe_locks: stripe_locks,
            _lock: lock,
        })
    }

    /// The worker pools and topology its collections run on.
    pub fn machine(&self) -> &Arc<Machine> {
        &self.machine
    }

    fn directory(root: &Path, name: &str) -> PathBuf {
        root.join("collections").join(name)
    }

    /// Publishes the manifest listing `names` and `aliases`.
    fn publish<'a>(&self, names: impl Iterator<Item = &'a str>, aliases: &Aliases) -> Result<()> {
        let text = aliases::manifest_text(names, aliases);
        manifest::publish(self.fs.as_ref(), &self.root, text.as_bytes())?;
        Ok(())
    }

    pub fn file_system(&self) -> &dyn FileSystem {
        self.fs.as_ref()
    }

    pub fn has_background_optimizer(&self) -> bool {
        self.optimizer.is_some()
    }

    pub fn list(&self) -> Vec<String> {
        self.collections.read().keys().cloned().collect()
    }

    /// Collection `name`, or the collection alias `name` points at.
    pub fn collection(&self, name: &str) -> Result<Arc<Collection>> {
        let collections = self.collections.read();
        let found = match collections.get(name) {
            Some(collection) => Some(collection),
            None => self
                .aliases
                .read()
                .get(name)
                .and_then(|target| collections.get(target)),
        };
        found
            .cloned()
            .ok_or_else(|| EngineError::CollectionNotFound {
                path: name.to_string(),
            })
    }

    /// The name of the collection `name` refers to: itself, or its alias's target.
    pub fn resolve(&self, name: &str) -> Option<String> {
        if self.collections.read().contains_key(name) {
            return Some(name.to_string());
        }
        self.aliases.read().get(name).cloned()
    }

    /// Every alias and the collection it points at, sorted by alias.
    pub fn aliases(&self) -> Vec<(String, String)> {
        let aliases = self.aliases.read();
        aliases
            .iter()
            .map(|(a, c)| (a.clone(), c.clone()))
            .collect()
    }

    /// Applies alias changes in order (Qdrant's `POST /collections/aliases`), all or
    /// nothing: the first that fails (an alias of a missing collection, one named as a
    /// collection, a rename of a missing alias) leaves every alias as it was. Published
    /// durably before returning.
    pub fn update_aliases(&self, actions: &[AliasAction]) -> Result<()> {
        let collections = self.collections.write();
        let mut current = self.aliases.write();
        let importing = self.importing.lock();
        let exists = |name: &str| collections.contains_key(name);
        let taken = |name: &str| exists(name) || importing.contains(name);
        let next = aliases::apply(&current, actions, exists, taken)?;
        drop(importing);
        self.publish(collections.keys().map(String::as_str), &next)?;
        *current = next;
        Ok(())
    }

    /// Refuses `name` for a new collection when an alias has it (Qdrant's message).
    fn check_not_an_alias(&self, name: &str) -> Result<()> {
        if self.aliases.read().contains_key(name) {
            return Err(EngineError::NameInUse {
                reason: format!(
                    "Can't create collection with name {name}. Alias with the same name \
                     already exists"
                ),
            });
        }
        Ok(())
    }

    pub fn create_collection(
        &self,
        name: &str,
        config: CollectionConfig,
    ) -> Result<Arc<Collection>> {
        self.create_collection_with_spaces(name, config, VectorSpaces::default())
    }

    /// [`Database::create_collection`] with named vectors `spaces` (see
    /// [`Collection::create_with_spaces`]; [`CollectionConfig::named`] gives the
    /// configuration that goes with them).
    pub fn create_collection_with_spaces(
        &self,
        name: &str,
        config: CollectionConfig,
        spaces: VectorSpaces,
    ) -> Result<Arc<Collection>> {
        check_collection_name(name)?;
        let mut collections = self.collections.write();
        self.check_not_an_alias(name)?;
        if collections.contains_key(name) || self.importing.lock().contains(name) {
            return Err(EngineError::CollectionExists {
                path: name.to_string(),
            });
        }
        let directory = Self::directory(&self.root, name);
        let stripes = stripe_roots(&self.stripe_dirs, name);
        // Leftovers of a create that crashed before the database manifest listed it.
        Collection::remove_striped_files(self.fs.as_ref(), &directory, &stripes)?;
        // checked here first, so a bad configuration is refused as such, not by each rank
        config.validate()?;
        config.check_spaces(&spaces)?;
        // the other ranks next: a rank that cannot make it leaves none made anywhere
        let on_peers = config.to_bytes(&spaces);
        let made_on = self.make_everywhere(name, &on_peers)?;
        let made =
            Collection::create_with_spaces(self.fs.as_ref(), &directory, config, spaces, &stripes)
                .map(|collection| {
                    link(
                        collection.placed_on(Arc::clone(&self.machine)),
                        self.peers.as_ref(),
                        name,
                    )
                })
                .and_then(|collection| {
                    let names = collections.keys().map(String::as_str).chain([name]);
                    self.publish(names, &self.aliases.read())?;
                    Ok(collection)
                });
        let collection = match made {
            Ok(collection) => Arc::new(collection),
            Err(error) => {
                self.unmake(name, &made_on);
                return Err(error);
            }
        };
        collection.set_policy(self.policy.clone());
        collections.insert(name.to_string(), Arc::clone(&collection));
        Ok(collection)
    }

    /// Bulk import into a new collection `name` (see [`Collection::import`]): built
    /// without holding the database lock (the name is reserved meanwhile), then listed in
    /// the database manifest — the one publication that makes it exist. A failure or
    /// crash before that leaves no collection; the files a failed import wrote are removed
    /// (best effort), a crash's by the next create or import of the name.
    pub fn import_collection(
        &self,
        name: &str,
        config: CollectionConfig,
        points: Vec<Point>,
    ) -> Result<(Arc<Collection>, ImportReport)> {
        self.import_collection_with_progress(name, config, points, &ImportProgress::new())
    }

    /// [`Database::import_collection`], followed through `progress` (rows linked so far of
    /// the distinct points, summed over shards) and stopped by [`ImportProgress::cancel`]:
    /// a cancel seen before the database manifest lists the collection fails the
    /// import with [`EngineError::Cancelled`]; a later one changes nothing.
    pub fn import_collection_with_progress<'a>(
        &self,
        name: &str,
        config: CollectionConfig,
        source: impl Into<ImportSource<'a>>,
        progress: &ImportProgress,
    ) -> Result<(Arc<Collection>, ImportReport)> {
        let spaces = VectorSpaces::default();
        self.import_collection_with_spaces(name, (config, spaces), source, progress)
    }

    /// [`Database::import_collection_with_progress`] of a collection with named vectors
    /// (see [`Collection::import_with_spaces`]; [`CollectionConfig::named`] gives the
    /// configuration that goes with them).
    pub fn import_collection_with_spaces<'a>(
        &self,
        name: &str,
        (config, spaces): (CollectionConfig, VectorSpaces),
        source: impl Into<ImportSource<'a>>,
        progress: &ImportProgress,
    ) -> Result<(Arc<Collection>, ImportReport)> {
        check_collection_name(name)?;
        {
            let collections = self.collections.read();
            self.check_not_an_alias(name)?;
            if collections.contains_key(name) || !self.importing.lock().insert(name.to_string()) {
                return Err(EngineError::CollectionExists {
                    path: name.to_string(),
                });
            }
        }
        let result = self.import_reserved(name, (config, spaces), source.into(), progress);
        self.importing.lock().remove(name);
        result
    }

    fn import_reserved(
        &self,
        name: &str,
        (config, spaces): (CollectionConfig, VectorSpaces),
        source: ImportSource<'_>,
        progress: &ImportProgress,
    ) -> Result<(Arc<Collection>, ImportReport)> {
        if let Some(Linked(peers)) = &self.peers {
            // each rank imports its own points from the source: `sagitta import --mpi`
            return Err(EngineError::Unavailable {
                reason: format!(
                    "bulk import into a job of {} ranks runs on every rank at once \
                     (`mpirun -n {} sagitta import --mpi`), not through rank 0",
                    peers.ranks(),
                    peers.ranks()
                ),
            });
        }
        let directory = Self::directory(&self.root, name);
        Collection::remove_striped_files(
            self.fs.as_ref(),
            &directory,
            &stripe_roots(&self.stripe_dirs, name),
        )?;
        let imported = Collection::import_with_spaces(
            self.fs.as_ref(),
            &directory,
            config,
            spaces,
            source,
            progress,
        )
        .and_then(|imported| progress.check().map(|()| imported));
        let (collection, report) = match imported {
            Ok(imported) => imported,
            Err(error) => {
                // Nothing lists these files (the name is still reserved): a failed
                // cleanup only leaves them for the next create or import to remove.
                let _ = Collection::remove_files(self.fs.as_ref(), &directory);
                return Err(error);
            }
        };
        let collection = Arc::new(collection.placed_on(Arc::clone(&self.machine)));
        collection.set_policy(self.policy.clone());
        let mut collections = self.collections.write();
        let names = collections.keys().map(String::as_str).chain([name]);
        self.publish(names, &self.aliases.read())?;
        collections.insert(name.to_string(), Arc::clone(&collection));
        Ok((collection, report))
    }

    /// Recovers the collection snapshot `input` (see [`crate::collection::snapshot`]) as
    /// the new collection `name` (which must not exist). A bad snapshot (wrong frame,
    /// checksum, manifest, point, or count) fails the recovery and the partly built
    /// collection is dropped.
    pub fn recover_collection(
        &self,
        name: &str,
        input: &mut dyn std::io::Read,
    ) -> Result<Arc<Collection>> {
        let (config, schema, spaces, settings) = snapshot::read_manifest(input)?;
        let collection = self.create_collection_with_spaces(name, config, spaces)?;
        let filled = snapshot::fill(&collection, input).and_then(|()| {
            for (field, kind) in &schema {
                collection.create_payload_index(self.file_system(), field, *kind)?;
            }
            collection.set_settings(self.file_system(), &settings)?;
            collection.flush()
        });
        match filled {
            Ok(()) => Ok(collection),
            Err(error) => {
                drop(collection);
                // the snapshot's error is the one to report; a failed drop leaves the
                // partial collection listed, to be dropped by hand
                let _ = self.drop_collection(name);
                Err(error)
            }
        }
    }

    /// Makes every write acknowledged so far in every collection durable (see
    /// [`Collection::flush`]); a server calls it on shutdown. A collection that fails
    /// (a poisoned shard) does not stop the others; the first error is returned.
    pub fn flush(&self) -> Result<()> {
        let collections: Vec<Arc<Collection>> = self.collections.read().values().cloned().collect();
        let mut first_error = None;
        for collection in &collections {
            if let Err(error) = collection.flush() {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Drops a collection: unlisted first (durably), then its files are removed.
    /// Closes collection `name` and opens it again from its files: the operator's way back
    /// after a shard refused writes (red health: a log append or a seal's publication
    /// failed) and the cause — a full disk, a file size limit — has been fixed. Waits for
    /// running optimizer work; writes acknowledged before the failure are kept (they are in
    /// the logs), the failed one was never acknowledged. If opening fails, the closed
    /// collection stays listed (refusing writes) and the error is returned.
    pub fn reopen_collection(&self, name: &str) -> Result<Arc<Collection>> {
        let mut collections = self.collections.write();
        let Some(old) = collections.get(name).cloned() else {
            return Err(EngineError::CollectionNotFound {
                path: name.to_string(),
            });
        };
        old.close();
        let policy = old.policy();
        let directory = old.directory().to_path_buf();
        drop(old);
        let reopened = Collection::open_striped(
            self.fs.as_ref(),
            &directory,
            &stripe_roots(&self.stripe_dirs, name),
        )?
        .placed_on(Arc::clone(&self.machine));
        let reopened = Arc::new(link(reopened, self.peers.as_ref(), name));
        reopened.set_policy(policy);
        collections.insert(name.to_string(), Arc::clone(&reopened));
        Ok(reopened)
    }

    pub fn drop_collection(&self, name: &str) -> Result<()> {
        let mut collections = self.collections.write();
        let Some(collection) = collections.get(name).cloned() else {
            return Err(EngineError::CollectionNotFound {
                path: name.to_string(),
            });
        };
        // the other ranks first: while one of them cannot, rank 0 keeps it listed (a
        // second drop finishes the job; ranks that dropped it already answer done)
        self.everywhere(|| PeerCall::Drop {
            name: name.to_string(),
        })?;
        // the collection's aliases go with it, in the same publication
        let mut aliases = self.aliases.write();
        let mut kept = aliases.clone();
        kept.retain(|_, target| target != name);
        let names = collections
            .keys()
            .map(String::as_str)
            .filter(|n| *n != name);
        self.publish(names, &kept)?;
        *aliases = kept;
        drop(aliases);
        collections.remove(name);
        collection.close();
        Collection::remove_striped_files(
            self.fs.as_ref(),
            collection.directory(),
            &stripe_roots(&self.stripe_dirs, name),
        )?;
        Ok(())
    }
}

impl Database {
    /// `call()` asked of every other rank of the job (nothing without peers); each
    /// rank's answer.
    fn ask_everywhere(
        &self,
        call: impl Fn() -> PeerCall,
    ) -> Vec<(usize, std::result::Result<PeerAnswer, String>)> {
        let Some(Linked(peers)) = &self.peers else {
            return Vec::new();
        };
        let ranks: Vec<usize> = (1..peers.ranks()).collect();
        if ranks.is_empty() {
            return Vec::new();
        }
        let answers = peers.ask(ranks.iter().map(|&rank| (rank, call())).collect());
        ranks.into_iter().zip(answers).collect()
    }

    /// [`Database::ask_everywhere`], every rank's refusal or silence one error.
    fn everywhere(&self, call: impl Fn() -> PeerCall) -> Result<()> {
        let answers = self
            .ask_everywhere(call)
            .into_iter()
            .map(|(_, answer)| answer);
        every_answer(answers.collect()).map(drop)
    }

    /// Collection `name` made on every other rank with `config`; the ranks that may hold
    /// it now (those that made it, or did not answer). When one refused, the others'
    /// are dropped again and its refusal returned.
    fn make_everywhere(&self, name: &str, config: &[u8]) -> Result<Vec<usize>> {
        let answers = self.ask_everywhere(|| PeerCall::Create {
            name: name.to_string(),
            config: config.to_vec(),
        });
        let failed = answers.iter().any(|(_, answer)| answer.is_err());
        // a rank that refused keeps what it had; the others may have made it
        let (made_on, refusals): (Vec<usize>, Vec<String>) = (
            answers
                .iter()
                .filter(|(_, answer)| {
                    answer.as_ref().is_ok() || answer.as_ref().is_err_and(|e| is_silence(e))
                })
                .map(|(rank, _)| *rank)
                .collect(),
            answers
                .into_iter()
                .filter_map(|(_, answer)| answer.err())
                .collect(),
        );
        if failed {
            self.unmake(name, &made_on);
            return Err(EngineError::Unavailable {
                reason: refusals.join("; "),
            });
        }
        Ok(made_on)
    }

    /// Collection `name` dropped again on `ranks` (best effort: a rank that fails keeps
    /// it, and a later create of the name there is refused, naming it).
    fn unmake(&self, name: &str, ranks: &[usize]) {
        let Some(Linked(peers)) = &self.peers else {
            return;
        };
        let drops = ranks
            .iter()
            .map(|&rank| {
                let name = name.to_string();
                (rank, PeerCall::Drop { name })
            })
            .collect();
        let _ = peers.ask(drops);
    }

    /// Answers rank 0's `call` on a rank other than 0 (its database is not linked).
    pub fn answer(&self, call: PeerCall) -> Result<PeerAnswer> {
        match call {
            PeerCall::Create { name, config } => {
                let (config, spaces) = CollectionConfig::from_bytes(&config).map_err(|error| {
                    EngineError::Corrupt {
                        reason: format!("collection config from rank 0: {error}"),
                    }
                })?;
                self.create_collection_with_spaces(&name, config, spaces)?;
                Ok(PeerAnswer::Done)
            }
            PeerCall::Drop { name } => match self.drop_collection(&name) {
                Ok(()) | Err(EngineError::CollectionNotFound { .. }) => Ok(PeerAnswer::Done),
                Err(error) => Err(error),
            },
            call => self
                .collection(call.collection())?
                .answer(self.fs.as_ref(), call),
        }
    }
}

/// `collection` linked to `peers` (as is without).
fn link(collection: Collection, peers: Option<&Linked>, name: &str) -> Collection {
    match peers {
        Some(Linked(peers)) => collection.linked(Arc::clone(peers), name),
        None => collection,
    }
}

/// Collection `name`'s directory under each stripe directory.
fn stripe_roots(stripe_dirs: &[PathBuf], name: &str) -> Vec<PathBuf> {
    stripe_dirs
        .iter()
        .map(|directory| directory.join("collections").join(name))
        .collect()
}

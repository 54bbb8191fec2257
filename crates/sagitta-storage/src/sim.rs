//! A simulated disk for deterministic crash tests (TigerBeetle's VOPR, redb's crash tests).
//!
//! Every file has a *current* content and a *durable* content; `sync` copies one to the
//! other. Directory entries (create, rename, remove) are durable only after `sync_dir`.
//! [`SimFileSystem::crash`] throws away what is not durable, keeping for each file a random
//! prefix of its unsynced tail (a torn write), and reverts unsynced directory changes.
//! Faults: fail the N-th write (EIO), run out of space after a byte budget (ENOSPC), fail
//! syncs (EIO). All randomness comes from the seed the caller passes.
//!
//! Interleaving: [`SimFileSystem::pause_at_file`] stops the next thread that opens or writes
//! a file whose name ends with a given suffix until the test releases it, so a test can
//! run writes while a seal or merge is halfway through its build, deterministically.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use rand::Rng;

use crate::error::{Result, StorageError};
use crate::fs::{AppendFile, FileSystem, LockGuard};

#[derive(Clone, Default, Debug)]
struct Content {
    current: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Default, Debug)]
struct State {
    /// Files by id; names point at ids so renames move content, not copies.
    contents: HashMap<u64, Content>,
    current_names: HashMap<PathBuf, u64>,
    durable_names: HashMap<PathBuf, u64>,
    next_id: u64,
    writes_until_failure: Option<u64>,
    bytes_until_full: Option<u64>,
    fail_syncs: bool,
    fail_directory_syncs: bool,
    directory_syncs_until_failure: Option<u64>,
    bytes_written: u64,
    locked: HashSet<PathBuf>,
}

/// A lock on a simulated file (locks are in memory: a crash drops them all with the
/// process holding them, as with `flock`).
struct SimLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.state.lock().locked.remove(&self.path);
    }
}

/// Where the pause point stands: armed for a file name suffix, holding a thread, or
/// released (with or without an injected failure).
#[derive(Default, Debug)]
struct Gate {
    suffix: Option<String>,
    paused: bool,
    /// `Some(fail)` once the test lets the held thread go.
    released: Option<bool>,
}

/// The simulated disk; clones share it.
#[derive(Clone, Default, Debug)]
pub struct SimFileSystem {
    state: Arc<Mutex<State>>,
    gate: Arc<(Mutex<Gate>, Condvar)>,
}

fn io_error(operation: &'static str, path: &Path, kind: std::io::ErrorKind) -> StorageError {
    StorageError::io(
        operation,
        path,
        &std::io::Error::new(kind, "injected by the simulator"),
    )
}

impl SimFileSystem {
    pub fn new() -> SimFileSystem {
        SimFileSystem::default()
    }

    /// The `count`-th write from now (1 = the next) fails with EIO.
    pub fn fail_write_after(&self, count: u64) {
        self.state.lock().writes_until_failure = Some(count);
    }

    /// Writes fail with ENOSPC once `bytes` more bytes have been written.
    pub fn set_space_left(&self, bytes: Option<u64>) {
        self.state.lock().bytes_until_full = bytes;
    }

    /// Every sync fails with EIO while set.
    pub fn set_fail_syncs(&self, fail: bool) {
        self.state.lock().fail_syncs = fail;
    }

    /// Every directory sync fails with EIO while set (file syncs still work).
    pub fn set_fail_directory_syncs(&self, fail: bool) {
        self.state.lock().fail_directory_syncs = fail;
    }

    /// The `count`-th directory sync from now (1 = the next) fails with EIO.
    pub fn fail_directory_sync_after(&self, count: u64) {
        self.state.lock().directory_syncs_until_failure = Some(count);
    }

    /// Bytes written through the simulator so far (write amplification accounting).
    pub fn bytes_written(&self) -> u64 {
        self.state.lock().bytes_written
    }

    /// Simulates power loss: unsynced directory changes are reverted; each file keeps its
    /// durable content plus a random prefix of what was appended after it. Clears faults.
    pub fn crash(&self, rng: &mut impl Rng) {
        let mut state = self.state.lock();
        state.current_names = state.durable_names.clone();
        for content in state.contents.values_mut() {
            let durable_length = content.durable.len();
            if content.current.starts_with(&content.durable) {
                let unsynced = content.current.len() - durable_length;
                let survive = if unsynced == 0 {
                    0
                } else {
                    rng.gen_range(0..=unsynced)
                };
                content.current.truncate(durable_length + survive);
            } else {
                content.current.clone_from(&content.durable);
            }
            content.durable.clone_from(&content.current);
        }
        state.writes_until_failure = None;
        state.bytes_until_full = None;
        state.fail_syncs = false;
        state.fail_directory_syncs = false;
        state.directory_syncs_until_failure = None;
    }

    fn charge_write(state: &mut State, path: &Path, bytes: usize) -> Result<()> {
        if let Some(remaining) = state.writes_until_failure.as_mut() {
            *remaining -= 1;
            if *remaining == 0 {
                state.writes_until_failure = None;
                return Err(io_error("writing", path, std::io::ErrorKind::Other));
            }
        }
        if let Some(space) = state.bytes_until_full.as_mut() {
            if (bytes as u64) > *space {
                return Err(io_error("writing", path, std::io::ErrorKind::StorageFull));
            }
            *space -= bytes as u64;
        }
        state.bytes_written += bytes as u64;
        Ok(())
    }

    /// Arms the pause point: the next thread to open or write a file whose name ends with
    /// `suffix` waits there until [`SimFileSystem::release`]. One pause per arming.
    pub fn pause_at_file(&self, suffix: &str) {
        let mut gate = self.gate.0.lock();
        assert!(!gate.paused, "a thread is still held at the pause point");
        *gate = Gate {
            suffix: Some(suffix.to_string()),
            ..Gate::default()
        };
    }

    /// Waits until a thread is held at the pause point (true) or `gave_up()` says it never
    /// will be (false: the pause point is disarmed).
    pub fn wait_until_paused(&self, gave_up: impl Fn() -> bool) -> bool {
        let (gate, signal) = &*self.gate;
        let mut gate = gate.lock();
        loop {
            if gate.paused {
                return true;
            }
            if gave_up() {
                gate.suffix = None;
                return false;
            }
            signal.wait_for(&mut gate, std::time::Duration::from_millis(1));
        }
    }

    /// Lets the held thread go on; with `fail` its open or write fails with EIO.
    pub fn release(&self, fail: bool) {
        let (gate, signal) = &*self.gate;
        let mut gate = gate.lock();
        assert!(gate.paused, "no thread is held at the pause point");
        gate.released = Some(fail);
        signal.notify_all();
    }

    /// The pause point, called before a file is opened or written (never under `state`).
    fn pass_gate(&self, path: &Path) -> Result<()> {
        let (gate, signal) = &*self.gate;
        let mut gate = gate.lock();
        let matches = match (&gate.suffix, path.file_name()) {
            (Some(suffix), Some(name)) => name.to_string_lossy().ends_with(suffix.as_str()),
            _ => false,
        };
        if !matches {
            return Ok(());
        }
        gate.suffix = None;
        gate.paused = true;
        signal.notify_all();
        let fail = loop {
            if let Some(fail) = gate.released {
                break fail;
            }
            signal.wait(&mut gate);
        };
        *gate = Gate::default();
        if fail {
            return Err(io_error("opening", path, std::io::ErrorKind::Other));
        }
        Ok(())
    }

    fn id_of(state: &State, path: &Path) -> Option<u64> {
        state.current_names.get(path).copied()
    }
}

struct SimAppendFile {
    state: Arc<Mutex<State>>,
    path: PathBuf,
    id: u64,
}

impl AppendFile for SimAppendFile {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        let mut state = self.state.lock();
        SimFileSystem::charge_write(&mut state, &self.path, bytes.len())?;
        state
            .contents
            .get_mut(&self.id)
            .expect("open files keep their content")
            .current
            .extend_from_slice(bytes);
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let mut state = self.state.lock();
        if state.fail_syncs {
            return Err(io_error("syncing", &self.path, std::io::ErrorKind::Other));
        }
        let content = state.contents.get_mut(&self.id).expect("open file");
        content.durable.clone_from(&content.current);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.state.lock().contents[&self.id].current.len() as u64
    }
}

impl FileSystem for SimFileSystem {
    fn create_dir_all(&self, _path: &Path) -> Result<()> {
        Ok(()) // directories are implicit in the simulator
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn AppendFile>> {
        self.pass_gate(path)?;
        let mut state = self.state.lock();
        let id = match SimFileSystem::id_of(&state, path) {
            Some(id) => id,
            None => {
                let id = state.next_id;
                state.next_id += 1;
                state.contents.insert(id, Content::default());
                state.current_names.insert(path.to_path_buf(), id);
                id
            }
        };
        Ok(Box::new(SimAppendFile {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
            id,
        }))
    }

    fn read(&self, path: &Path) -> Result<Option<Vec<u8>>> {
        let state = self.state.lock();
        Ok(SimFileSystem::id_of(&state, path).map(|id| state.contents[&id].current.clone()))
    }

    fn write_synced(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.pass_gate(path)?;
        let mut state = self.state.lock();
        SimFileSystem::charge_write(&mut state, path, bytes.len())?;
        if state.fail_syncs {
            return Err(io_error("syncing", path, std::io::ErrorKind::Other));
        }
        let id = state.next_id;
        state.next_id += 1;
        state.contents.insert(
            id,
            Content {
                current: bytes.to_vec(),
                durable: bytes.to_vec(),
            },
        );
        state.current_names.insert(path.to_path_buf(), id);
        Ok(())
    }

    fn truncate(&self, path: &Path, length: u64) -> Result<()> {
        let mut state = self.state.lock();
        if state.fail_syncs {
            return Err(io_error("syncing", path, std::io::ErrorKind::Other));
        }
        let id = SimFileSystem::id_of(&state, path)
            .ok_or_else(|| io_error("truncating", path, std::io::ErrorKind::NotFound))?;
        let content = state.contents.get_mut(&id).expect("named file");
        let length = usize::try_from(length).expect("simulated files are small");
        content.current.truncate(length);
        content.durable.clone_from(&content.current);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.state.lock();
        let id = state
            .current_names
            .remove(from)
            .ok_or_else(|| io_error("renaming", from, std::io::ErrorKind::NotFound))?;
        state.current_names.insert(to.to_path_buf(), id);
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut state = self.state.lock();
        state
            .current_names
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| io_error("removing", path, std::io::ErrorKind::NotFound))
    }

    fn sync_dir(&self, directory: &Path) -> Result<()> {
        let mut state = self.state.lock();
        let countdown_expired = match state.directory_syncs_until_failure.as_mut() {
            Some(remaining) => {
                *remaining -= 1;
                *remaining == 0
            }
            None => false,
        };
        if countdown_expired {
            state.directory_syncs_until_failure = None;
        }
        if state.fail_syncs || state.fail_directory_syncs || countdown_expired {
            return Err(io_error(
                "syncing directory",
                directory,
                std::io::ErrorKind::Other,
            ));
        }
        // Make every entry under `directory` durable as it is now.
        let in_directory = |path: &Path| path.parent() == Some(directory);
        let durable: Vec<PathBuf> = state
            .durable_names
            .keys()
            .filter(|path| in_directory(path))
            .cloned()
            .collect();
        for path in durable {
            state.durable_names.remove(&path);
        }
        let current: Vec<(PathBuf, u64)> = state
            .current_names
            .iter()
            .filter(|(path, _)| in_directory(path))
            .map(|(path, id)| (path.clone(), *id))
            .collect();
        state.durable_names.extend(current);
        Ok(())
    }

    fn lock_exclusive(&self, path: &Path) -> Result<LockGuard> {
        if !self.state.lock().locked.insert(path.to_path_buf()) {
            return Err(StorageError::Locked {
                path: path.to_path_buf(),
            });
        }
        Ok(LockGuard::new(SimLock {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }

    fn list(&self, directory: &Path) -> Result<Vec<PathBuf>> {
        let state = self.state.lock();
        let mut paths: Vec<PathBuf> = state
            .current_names
            .keys()
            .filter(|path| path.parent() == Some(directory))
            .cloned()
            .collect();
        paths.sort();
        Ok(paths)
    }
}

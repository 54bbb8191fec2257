//! The file-system seam. Everything durable goes through [`FileSystem`]; production uses
//! [`OsFileSystem`], tests use [`crate::sim::SimFileSystem`].

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, StorageError};

/// A file opened for appending.
pub trait AppendFile: Send {
    /// Appends `bytes` (not yet durable).
    fn append(&mut self, bytes: &[u8]) -> Result<()>;
    /// Makes every appended byte durable (fdatasync).
    fn sync(&mut self) -> Result<()>;
    /// Current length in bytes, durable or not.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The operations storage needs. Paths are absolute or relative to the process.
pub trait FileSystem: Send + Sync {
    fn create_dir_all(&self, path: &Path) -> Result<()>;
    /// Opens `path` for appending, creating it if missing. The directory entry of a new
    /// file is durable only after [`FileSystem::sync_dir`].
    fn open_append(&self, path: &Path) -> Result<Box<dyn AppendFile>>;
    /// The whole content, or `None` if the file does not exist.
    fn read(&self, path: &Path) -> Result<Option<Vec<u8>>>;
    /// Creates or replaces `path` with `bytes` and makes the content durable (the directory
    /// entry still needs [`FileSystem::sync_dir`]).
    fn write_synced(&self, path: &Path, bytes: &[u8]) -> Result<()>;
    /// Shrinks `path` to `length` bytes, durably.
    fn truncate(&self, path: &Path, length: u64) -> Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    fn remove(&self, path: &Path) -> Result<()>;
    /// Makes creations, renames and removals in `directory` durable.
    fn sync_dir(&self, directory: &Path) -> Result<()>;
    /// Paths of the files directly in `directory` (empty if it does not exist).
    fn list(&self, directory: &Path) -> Result<Vec<PathBuf>>;
    /// Takes an exclusive advisory lock on `path` (created if missing) for as long as the
    /// returned guard lives; [`StorageError::Locked`] if another holder has it.
    fn lock_exclusive(&self, path: &Path) -> Result<LockGuard>;
}

/// Holds a lock taken by [`FileSystem::lock_exclusive`] until dropped.
pub struct LockGuard(#[allow(dead_code)] Box<dyn std::any::Any + Send + Sync>);

impl LockGuard {
    pub fn new(holder: impl std::any::Any + Send + Sync) -> LockGuard {
        LockGuard(Box::new(holder))
    }
}

/// Removes `path` if it exists; returns whether it did.
pub fn remove_if_exists(fs: &dyn FileSystem, path: &Path) -> Result<bool> {
    match fs.remove(path) {
        Ok(()) => Ok(true),
        Err(StorageError::Io {
            kind: std::io::ErrorKind::NotFound,
            ..
        }) => Ok(false),
        Err(error) => Err(error),
    }
}

/// Real files through `std::fs`, with `fsync` where the trait promises durability.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsFileSystem;

struct OsAppendFile {
    file: File,
    path: PathBuf,
    length: u64,
}

impl AppendFile for OsAppendFile {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all(bytes)
            .map_err(|error| StorageError::io("appending to", &self.path, &error))?;
        self.length += bytes.len() as u64;
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|error| StorageError::io("syncing", &self.path, &error))
    }
    fn len(&self) -> u64 {
        self.length
    }
}

impl FileSystem for OsFileSystem {
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|error| StorageError::io("creating", path, &error))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn AppendFile>> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|error| StorageError::io("opening", path, &error))?;
        let length = file
            .metadata()
            .map_err(|error| StorageError::io("reading metadata of", path, &error))?
            .len();
        Ok(Box::new(OsAppendFile {
            file,
            path: path.to_path_buf(),
            length,
        }))
    }

    fn read(&self, path: &Path) -> Result<Option<Vec<u8>>> {
        let mut file = match File::open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(StorageError::io("opening", path, &error)),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|error| StorageError::io("reading", path, &error))?;
        Ok(Some(bytes))
    }

    fn write_synced(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let mut file =
            File::create(path).map_err(|error| StorageError::io("creating", path, &error))?;
        file.write_all(bytes)
            .map_err(|error| StorageError::io("writing", path, &error))?;
        file.sync_all()
            .map_err(|error| StorageError::io("syncing", path, &error))
    }

    fn truncate(&self, path: &Path, length: u64) -> Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|error| StorageError::io("opening", path, &error))?;
        file.set_len(length)
            .map_err(|error| StorageError::io("truncating", path, &error))?;
        file.sync_all()
            .map_err(|error| StorageError::io("syncing", path, &error))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|error| StorageError::io("renaming", from, &error))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|error| StorageError::io("removing", path, &error))
    }

    fn sync_dir(&self, directory: &Path) -> Result<()> {
        File::open(directory)
            .and_then(|dir| dir.sync_all())
            .map_err(|error| StorageError::io("syncing directory", directory, &error))
    }

    fn list(&self, directory: &Path) -> Result<Vec<PathBuf>> {
        let entries = match std::fs::read_dir(directory) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(StorageError::io("listing", directory, &error)),
        };
        let mut paths = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|error| StorageError::io("listing", directory, &error))?;
            if entry.file_type().is_ok_and(|kind| kind.is_file()) {
                paths.push(entry.path());
            }
        }
        paths.sort();
        Ok(paths)
    }

    fn lock_exclusive(&self, path: &Path) -> Result<LockGuard> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|error| StorageError::io("opening lock file", path, &error))?;
        match file.try_lock() {
            Ok(()) => Ok(LockGuard::new(file)),
            Err(std::fs::TryLockError::WouldBlock) => Err(StorageError::Locked {
                path: path.to_path_buf(),
            }),
            Err(std::fs::TryLockError::Error(error)) => {
                Err(StorageError::io("locking", path, &error))
            }
        }
    }
}

//! The file-system seam. Everything durable goes through [`FileSystem`]; production uses
//! [`OsFileSystem`], tests use [`crate::sim::SimFileSystem`].

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, StorageError};
use crate::pageio::{self, Page, PageFile, PageRead, PAGE_BYTES};

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
    /// Opens `path` for one front-to-back read without holding it whole in memory (an
    /// index file loaded section by section), or `None` if it does not exist. The default
    /// serves the bytes of [`FileSystem::read`] (the simulator).
    fn open_read(&self, path: &Path) -> Result<Option<ReadStream>> {
        Ok(self.read(path)?.map(|bytes| ReadStream {
            len: bytes.len() as u64,
            reader: Box::new(std::io::Cursor::new(bytes)),
        }))
    }
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
    /// Opens `path` for page reads (the disk segment's records). The default reads the
    /// whole file into memory and serves pages from it (the simulator); [`OsFileSystem`]
    /// reads the device through the process's [`pageio::shared`] engine.
    fn open_pages(&self, path: &Path) -> Result<Box<dyn PageSource>> {
        let bytes = self
            .read(path)?
            .ok_or_else(|| StorageError::io("opening for page reads", path, &not_found()))?;
        Ok(Box::new(MemoryPages {
            bytes,
            path: path.to_path_buf(),
        }))
    }
}

/// A file opened by [`FileSystem::open_read`]: its bytes from the start, and how many.
pub struct ReadStream {
    pub reader: Box<dyn Read + Send>,
    pub len: u64,
}

/// A file read a page at a time.
pub trait PageSource: Send + Sync {
    /// Whole pages in the file (a partial last page is not readable).
    fn page_count(&self) -> u64;
    /// Performs every read of `reads` and returns once all have completed; a read past the
    /// last whole page fails the call.
    fn read_pages(&self, reads: &mut [PageRead<'_>]) -> Result<()>;
    fn path(&self) -> &Path;
    /// One page for each number of `pages`, in that order, read together.
    fn read_each(&self, pages: &[u64]) -> Result<Vec<Page>> {
        pageio::read_each(pages, |reads| self.read_pages(reads))
    }
}

fn not_found() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")
}

/// A file's bytes held in memory, served as pages.
struct MemoryPages {
    bytes: Vec<u8>,
    path: PathBuf,
}

impl PageSource for MemoryPages {
    fn page_count(&self) -> u64 {
        (self.bytes.len() / PAGE_BYTES) as u64
    }

    fn read_pages(&self, reads: &mut [PageRead<'_>]) -> Result<()> {
        for read in reads.iter_mut() {
            let start = usize::try_from(read.page)
                .ok()
                .and_then(|page| page.checked_mul(PAGE_BYTES));
            let end = start.and_then(|start| start.checked_add(read.into.len() * PAGE_BYTES));
            let (Some(start), Some(end)) = (start, end) else {
                return Err(past_end(&self.path, read.page));
            };
            let Some(bytes) = self.bytes.get(start..end) else {
                return Err(past_end(&self.path, read.page));
            };
            for (page, chunk) in read.into.iter_mut().zip(bytes.chunks_exact(PAGE_BYTES)) {
                page.0.copy_from_slice(chunk);
            }
        }
        Ok(())
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

fn past_end(path: &Path, page: u64) -> StorageError {
    let error = std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        format!("page {page}: the file ends inside the read"),
    );
    StorageError::io("reading pages of", path, &error)
}

/// A file read through the process's page reader.
struct DevicePages {
    file: PageFile,
}

impl PageSource for DevicePages {
    fn page_count(&self) -> u64 {
        self.file.len() / PAGE_BYTES as u64
    }

    fn read_pages(&self, reads: &mut [PageRead<'_>]) -> Result<()> {
        pageio::shared().read(&self.file, reads)
    }

    fn path(&self) -> &Path {
        self.file.path()
    }
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

/// Bytes a [`StreamedFile`] gathers before appending them.
const STREAM_BUFFER_BYTES: usize = 1 << 20;

/// A new file written as a stream (`std::io::Write`) through the [`FileSystem`] seam and
/// synced by [`StreamedFile::finish`]: what [`FileSystem::write_synced`] does for bytes
/// already in memory, for payloads too large to gather first (a segment's vectors).
pub struct StreamedFile {
    file: Box<dyn AppendFile>,
    buffer: Vec<u8>,
    /// The storage error behind the last failed write (`io::Write` can only carry text).
    failure: Option<StorageError>,
}

impl StreamedFile {
    /// Starts `path` afresh: a file left there (by an attempt that failed) is removed first.
    pub fn create(fs: &dyn FileSystem, path: &Path) -> Result<StreamedFile> {
        remove_if_exists(fs, path)?;
        Ok(StreamedFile {
            file: fs.open_append(path)?,
            buffer: Vec::with_capacity(STREAM_BUFFER_BYTES),
            failure: None,
        })
    }

    fn drain(&mut self) -> Result<()> {
        if !self.buffer.is_empty() {
            self.file.append(&self.buffer)?;
            self.buffer.clear();
        }
        Ok(())
    }

    fn io_failure(&mut self, error: StorageError) -> std::io::Error {
        let message = error.to_string();
        self.failure = Some(error);
        std::io::Error::other(message)
    }

    /// The storage error behind a failed `write`, typed.
    pub fn take_failure(&mut self) -> Option<StorageError> {
        self.failure.take()
    }

    /// Appends what is buffered and syncs; returns the file's length.
    pub fn finish(mut self) -> Result<u64> {
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        self.drain()?;
        self.file.sync()?;
        Ok(self.file.len())
    }
}

impl Write for StreamedFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.buffer.len() + bytes.len() > STREAM_BUFFER_BYTES {
            if let Err(error) = self.drain() {
                return Err(self.io_failure(error));
            }
        }
        if bytes.len() >= STREAM_BUFFER_BYTES {
            if let Err(error) = self.file.append(bytes) {
                return Err(self.io_failure(error));
            }
        } else {
            self.buffer.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.drain().map_err(|error| self.io_failure(error))
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
    fn open_pages(&self, path: &Path) -> Result<Box<dyn PageSource>> {
        Ok(Box::new(DevicePages {
            file: pageio::shared().open(path)?,
        }))
    }

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

    fn open_read(&self, path: &Path) -> Result<Option<ReadStream>> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(StorageError::io("opening", path, &error)),
        };
        let len = file
            .metadata()
            .map_err(|error| StorageError::io("reading the length of", path, &error))?
            .len();
        Ok(Some(ReadStream {
            reader: Box::new(std::io::BufReader::with_capacity(1 << 16, file)),
            len,
        }))
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::Path;

    use rand::SeedableRng;

    use super::{FileSystem, StreamedFile};
    use crate::sim::SimFileSystem;
    use crate::StorageError;

    #[test]
    fn a_streamed_file_replaces_leftovers_and_is_durable_once_finished() {
        let fs = SimFileSystem::new();
        let path = Path::new("/d/segment");
        fs.create_dir_all(Path::new("/d")).unwrap();
        fs.write_synced(path, b"left by a failed attempt").unwrap();
        let mut file = StreamedFile::create(&fs, path).unwrap();
        let big = vec![7u8; 3 << 20];
        file.write_all(b"head").unwrap();
        file.write_all(&big).unwrap();
        file.write_all(b"tail").unwrap();
        assert_eq!(file.finish().unwrap(), (4 + big.len() + 4) as u64);
        fs.sync_dir(Path::new("/d")).unwrap();
        fs.crash(&mut rand_chacha::ChaCha8Rng::seed_from_u64(1));
        let bytes = fs.read(path).unwrap().unwrap();
        assert_eq!(bytes.len(), 4 + big.len() + 4);
        assert!(bytes.starts_with(b"head") && bytes.ends_with(b"tail"));
    }

    #[test]
    fn a_failed_append_surfaces_as_the_typed_storage_error() {
        let fs = SimFileSystem::new();
        fs.create_dir_all(Path::new("/d")).unwrap();
        let mut file = StreamedFile::create(&fs, Path::new("/d/segment")).unwrap();
        fs.fail_write_after(1);
        let result = file.write_all(&vec![1u8; 2 << 20]);
        assert!(result.is_err());
        assert!(matches!(file.take_failure(), Some(StorageError::Io { .. })));
        let mut file = StreamedFile::create(&fs, Path::new("/d/other")).unwrap();
        file.write_all(b"small").unwrap();
        fs.set_fail_syncs(true);
        assert!(file.finish().is_err());
    }
}

//! Records files (checksummed 4 KiB pages of full vectors, [`sagitta_index::disk::records`])
//! as the segment kinds that keep vectors on disk open and read them: the disk segment's
//! extents, and an HNSW segment's rows with `vectors.on_disk` (issue 15 §3). Reads go
//! through the collection's page cache, then the file system's page reader (io_uring with
//! O_DIRECT on a real disk) for the pages it misses.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sagitta_index::disk::{split_page_id, PageReader, RecordLayout, RecordsHeader, RowRecords};
use sagitta_index::IndexError;
use sagitta_storage::fs::{FileSystem, PageSource, StreamedFile};
use sagitta_storage::pageio::{Page, PageCache, PageKey, PAGE_BYTES};

use super::listing::corrupt;
use super::records_path;
use crate::error::{EngineError, Result};

/// Numbers the records files of the process for their page-cache keys.
static NEXT_CACHE_FILE: AtomicU64 = AtomicU64::new(0);

/// One open records file: shared by the segments appended to it, with its page-cache key.
pub(crate) struct RecordsFile {
    /// The id of the segment that wrote it (its name).
    pub file: u64,
    pub source: Box<dyn PageSource>,
    pub cache_file: u64,
}

impl RecordsFile {
    /// Opens records file `file` (on its stripe of `stripes`), checking that it has
    /// `pages` whole pages and that `check` accepts its header page; gives it a page-cache
    /// key.
    pub fn open(
        fs: &dyn FileSystem,
        stripes: &[PathBuf],
        file: u64,
        pages: u64,
        check: impl FnOnce(&RecordsHeader) -> sagitta_index::error::Result<()>,
    ) -> Result<Arc<RecordsFile>> {
        let path = records_path(stripes, file)?;
        let source = fs.open_pages(&path)?;
        if source.page_count() != pages {
            return Err(corrupt(
                &path,
                &format!(
                    "{} whole pages, the index expects {pages}",
                    source.page_count()
                ),
            ));
        }
        let header = source.read_each(&[0])?;
        RecordsHeader::decode(&header[0])
            .and_then(|header| check(&header))
            .map_err(|error| corrupt(&path, &error.to_string()))?;
        Ok(Arc::new(RecordsFile {
            file,
            source,
            cache_file: NEXT_CACHE_FILE.fetch_add(1, Ordering::Relaxed),
        }))
    }
}

/// A failed or damaged read, as the engine reports it: damage names the records file
/// (with several, the first; the reason names the page).
pub(crate) fn read_error(files: &[Arc<RecordsFile>], error: IndexError) -> EngineError {
    match (error, files.first()) {
        (IndexError::Format { reason }, Some(file)) => corrupt(file.source.path(), &reason),
        (other, _) => EngineError::Index(other),
    }
}

/// Records files read through the page cache; a page id's extent
/// ([`sagitta_index::disk::page_id`]) is its index in `files`.
pub(crate) struct CachedReader<'a> {
    pub files: &'a [Arc<RecordsFile>],
    pub cache: &'a PageCache,
}

impl PageReader for CachedReader<'_> {
    /// Pages by id ([`sagitta_index::disk::page_id`]): from the cache, or read together
    /// from each records file that has some missing.
    fn read(&self, pages: &[u64]) -> sagitta_index::error::Result<Vec<Arc<Page>>> {
        let key = |id: u64| {
            let (extent, page) = split_page_id(id);
            self.files.get(extent).map(|file| PageKey {
                file: file.cache_file,
                page,
            })
        };
        let mut found: Vec<Option<Arc<Page>>> = pages
            .iter()
            .map(|id| key(*id).and_then(|key| self.cache.get(key)))
            .collect();
        let mut missing: Vec<(usize, u64, usize)> = pages
            .iter()
            .zip(&found)
            .enumerate()
            .filter(|(_, (_, hit))| hit.is_none())
            .map(|(slot, (id, _))| {
                let (extent, page) = split_page_id(*id);
                (extent, page, slot)
            })
            .collect();
        missing.sort_unstable();
        for group in missing.chunk_by(|a, b| a.0 == b.0) {
            let extent = group[0].0;
            let file = self.files.get(extent).ok_or_else(|| IndexError::Format {
                reason: format!("records extent {extent} does not exist"),
            })?;
            let numbers: Vec<u64> = group.iter().map(|(_, page, _)| *page).collect();
            let buffers = file
                .source
                .read_each(&numbers)
                .map_err(|error| IndexError::Io {
                    operation: "reading records pages",
                    message: error.to_string(),
                })?;
            for ((_, page, slot), bytes) in group.iter().zip(buffers) {
                let bytes = Arc::new(bytes);
                let key = PageKey {
                    file: file.cache_file,
                    page: *page,
                };
                self.cache.insert(key, Arc::clone(&bytes));
                found[*slot] = Some(bytes);
            }
        }
        Ok(found
            .into_iter()
            .map(|page| page.expect("every page found or read"))
            .collect())
    }
}

/// An HNSW segment's vectors in a records file of rows in node order (`vectors.on_disk`,
/// issue 15 §3; [`RowRecords`]): read for re-scoring, gets and merges.
pub(crate) struct RowsFile {
    /// The one records file (a slice, as [`CachedReader`] takes them).
    files: [Arc<RecordsFile>; 1],
    records: RowRecords,
    cache: Arc<PageCache>,
}

impl RowsFile {
    /// Writes records file `file`, durably, from `count` rows; returns its bytes.
    pub fn write<'v>(
        fs: &dyn FileSystem,
        stripes: &[PathBuf],
        file: u64,
        layout: RecordLayout,
        count: usize,
        rows: impl Iterator<Item = &'v [f32]>,
    ) -> Result<u64> {
        let mut out = StreamedFile::create(fs, &records_path(stripes, file)?)?;
        let written = RowRecords::write(&mut out, layout, count, rows);
        if let Some(failure) = out.take_failure() {
            return Err(failure.into());
        }
        written?;
        Ok(out.finish()?)
    }

    /// Opens records file `file`, which must hold `records` (header and length checked).
    pub fn open(
        fs: &dyn FileSystem,
        stripes: &[PathBuf],
        file: u64,
        records: RowRecords,
        cache: &Arc<PageCache>,
    ) -> Result<RowsFile> {
        let opened = RecordsFile::open(fs, stripes, file, records.pages(), |header| {
            records.check_header(header)
        })?;
        Ok(RowsFile {
            files: [opened],
            records,
            cache: Arc::clone(cache),
        })
    }

    /// The id of the segment that wrote the file (its name).
    pub fn file(&self) -> u64 {
        self.files[0].file
    }

    /// Bytes of the file: whole pages, the header page included.
    pub fn bytes(&self) -> u64 {
        self.records.pages() * PAGE_BYTES as u64
    }

    /// The rows `rows`, in order; a damaged page is an error naming the file and page.
    pub fn read(&self, rows: &[u32]) -> Result<Vec<Vec<f32>>> {
        let reader = CachedReader {
            files: &self.files,
            cache: &self.cache,
        };
        self.records
            .read(rows, &reader)
            .map_err(|error| read_error(&self.files, error))
    }
}

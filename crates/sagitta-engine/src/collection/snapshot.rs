//! Collection snapshots: a portable file holding a collection's manifest and every live
//! point, written while the collection keeps serving, and recovered into a new collection.
//!
//! A snapshot is a sequence of checksummed frames (docs/format.md, "Snapshots"): the
//! manifest (configuration, payload schema, named vectors, settings document), then the
//! points in pages of [`PAGE`] encoded as write-ahead-log upserts, then an end frame with
//! the number of points. Every write acknowledged before [`Collection::write_snapshot`]
//! starts is in the snapshot (the pages are read after it; a write racing the snapshot may
//! or may not be, each point whole). Recovery checks every frame and the count before it
//! answers, builds the collection through its write path (log, fsync) and leaves no
//! collection behind when the file is bad.

use std::io::{Read, Write};

use sagitta_storage::codec::{frame, unframe, Reader, FRAME_HEADER_BYTES};

use crate::codec::{self, Operation};
use crate::error::{EngineError, Result};
use crate::point::{Point, PointId};

use super::config::{CollectionConfig, Decoded};
use super::Collection;

/// Points per page frame.
pub const PAGE: usize = 512;

const MANIFEST: &[u8; 8] = b"SGSNAPMF";
const POINTS: &[u8; 8] = b"SGSNAPPT";
const END: &[u8; 8] = b"SGSNAPEN";
const SHARD: &[u8; 8] = b"SGSNAPSH";
/// Ids a shard recovery deletes per log record.
const STALE_DELETES_PER_RECORD: usize = 10_000;

/// Largest frame body a recovery reads (a page of the widest points stays far below).
const MAX_FRAME_BYTES: u64 = 1 << 31;

fn invalid(reason: impl Into<String>) -> EngineError {
    EngineError::InvalidSnapshot {
        reason: reason.into(),
    }
}

fn io(error: &std::io::Error) -> EngineError {
    invalid(format!("cannot read or write the snapshot: {error}"))
}

impl Collection {
    /// Writes a snapshot of this collection to `out`; returns the points it holds.
    pub fn write_snapshot(&self, out: &mut dyn Write) -> Result<u64> {
        self.write_pages(out, None)
    }

    /// Writes a snapshot of shard `shard` alone to `out` (Qdrant's shard snapshot): the
    /// collection's manifest, a shard frame (the shard's number and the collection's
    /// shard count), the shard's points; returns how many.
    pub fn write_shard_snapshot(&self, shard: usize, out: &mut dyn Write) -> Result<u64> {
        self.check_shard(shard)?;
        self.write_pages(out, Some(shard))
    }

    /// An error unless `shard` is one of this collection's shards (of a linked
    /// collection's, shard i is shard i of every rank: the points of any rank that the
    /// hash routes to it).
    pub fn check_shard(&self, shard: usize) -> Result<()> {
        if shard < self.shards.len() {
            return Ok(());
        }
        Err(EngineError::ParameterOutOfRange {
            name: "shard_id",
            value: shard,
            min: 0,
            max: self.shards.len() - 1,
        })
    }

    /// A page of up to [`PAGE`] live points from `offset` on, of every shard or of one,
    /// and the id the next page starts at.
    fn page(
        &self,
        offset: Option<PointId>,
        shard: Option<usize>,
    ) -> Result<(Vec<Point>, Option<PointId>)> {
        // a linked collection's snapshot holds every rank's points
        self.scroll_in(shard, offset, PAGE, None)
    }

    fn write_pages(&self, out: &mut dyn Write, shard: Option<usize>) -> Result<u64> {
        let manifest =
            self.config
                .encode_all(&self.payload_schema(), &self.spaces, &self.settings());
        out.write_all(&frame(MANIFEST, &manifest))
            .map_err(|error| io(&error))?;
        if let Some(shard) = shard {
            let mut body = (shard as u32).to_le_bytes().to_vec();
            body.extend_from_slice(&(self.shards.len() as u32).to_le_bytes());
            out.write_all(&frame(SHARD, &body))
                .map_err(|error| io(&error))?;
        }
        let mut written = 0u64;
        let mut offset: Option<PointId> = None;
        loop {
            let (page, next) = self.page(offset, shard)?;
            written += page.len() as u64;
            if !page.is_empty() {
                let body = codec::encode(&Operation::Upsert(page));
                out.write_all(&frame(POINTS, &body))
                    .map_err(|error| io(&error))?;
            }
            match next {
                Some(next) => offset = Some(next),
                None => break,
            }
        }
        out.write_all(&frame(END, &written.to_le_bytes()))
            .map_err(|error| io(&error))?;
        out.flush().map_err(|error| io(&error))?;
        Ok(written)
    }
}

/// The next frame of `input`: its magic and body, checked.
fn read_frame(input: &mut dyn Read) -> Result<([u8; 8], Vec<u8>)> {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    input.read_exact(&mut header).map_err(|error| io(&error))?;
    let mut magic = [0u8; 8];
    magic.copy_from_slice(&header[..8]);
    let length = Reader::new(&header[8..16])
        .u64("frame length")
        .map_err(|error| invalid(error.to_string()))?;
    if length > MAX_FRAME_BYTES {
        return Err(invalid(format!("a frame of {length} bytes is too large")));
    }
    let mut bytes = header.to_vec();
    let body_at = bytes.len();
    bytes.resize(body_at + usize::try_from(length).expect("bounded"), 0);
    input
        .read_exact(&mut bytes[body_at..])
        .map_err(|error| io(&error))?;
    let body = unframe(&magic, &bytes).map_err(|error| invalid(error.to_string()))?;
    Ok((magic, body.to_vec()))
}

/// The manifest at the start of the snapshot `input`, decoded.
pub(crate) fn read_manifest(input: &mut dyn Read) -> Result<Decoded> {
    let (magic, manifest) = read_frame(input)?;
    if magic != *MANIFEST {
        return Err(invalid("not a SagittaDB collection snapshot"));
    }
    CollectionConfig::try_decode_with(&manifest)
        .map_err(|error| invalid(format!("the manifest does not decode: {error}")))
}

/// Upserts the point frames of `input` into `collection` up to the end frame, whose
/// count must match.
pub(crate) fn fill(collection: &Collection, input: &mut dyn Read) -> Result<()> {
    read_pages(input, &mut |page| collection.upsert_stored(page))
}

/// Reads the whole snapshot `input` and checks it (frames, checksums, manifest, every
/// page, the count) without writing anything: what a recovery that replaces a collection
/// runs before it drops the old one. Returns the number of points.
pub fn verify_snapshot(input: &mut dyn Read) -> Result<u64> {
    let (config, _, spaces, _) = read_manifest(input)?;
    let mut points = 0u64;
    read_pages(input, &mut |page| {
        for point in page {
            config.prepare(&spaces, point)?;
            points += 1;
        }
        Ok(())
    })?;
    Ok(points)
}

impl Collection {
    /// Reads the shard snapshot `input` of shard `shard` and checks it against this
    /// collection without writing anything: a shard snapshot (not a collection's), of the
    /// same configuration and named vectors, of this shard of as many, every point valid
    /// and routed to this shard. Returns the number of points.
    pub fn verify_shard_snapshot(&self, shard: usize, input: &mut dyn Read) -> Result<u64> {
        self.check_shard(shard)?;
        let (config, _, spaces, _) = read_manifest(input)?;
        if config != self.config || spaces != *self.spaces {
            return Err(invalid(
                "the snapshot's collection has another configuration or other vectors",
            ));
        }
        let (magic, body) = read_frame(input)?;
        let mut numbers = Reader::new(&body);
        let read = |numbers: &mut Reader<'_>, what| {
            numbers
                .u32(what)
                .map_err(|error| invalid(error.to_string()))
        };
        if magic != *SHARD {
            return Err(invalid(
                "a collection snapshot, not a shard's: recover it as the collection's",
            ));
        }
        let (number, count) = (read(&mut numbers, "shard")?, read(&mut numbers, "shards")?);
        if (number as usize, count as usize) != (shard, self.shards.len()) {
            return Err(invalid(format!(
                "a snapshot of shard {number} of {count}, not of shard {shard} of {}",
                self.shards.len()
            )));
        }
        let mut points = 0u64;
        read_pages(input, &mut |page| {
            for point in page {
                if self.shard_of(&point.id) != shard {
                    return Err(invalid(format!(
                        "point {} is not of shard {shard}",
                        point.id
                    )));
                }
                self.config.prepare(&self.spaces, point)?;
                points += 1;
            }
            Ok(())
        })?;
        Ok(points)
    }

    /// Replaces shard `shard`'s points with those of the shard snapshot `input`, which
    /// [`Collection::verify_shard_snapshot`] has accepted: its points are upserted page by
    /// page through the write path, then the shard's points it does not hold are deleted
    /// (a crash in between leaves both; recovering again finishes the job).
    pub fn recover_shard(&self, shard: usize, input: &mut dyn Read) -> Result<u64> {
        self.check_shard(shard)?;
        read_manifest(input)?;
        let (magic, _) = read_frame(input)?;
        if magic != *SHARD {
            return Err(invalid("not a shard snapshot"));
        }
        let mut kept = std::collections::HashSet::new();
        read_pages(input, &mut |page| {
            kept.extend(page.iter().map(|point| point.id));
            self.upsert_stored(page)
        })?;
        let stale: Vec<PointId> = self
            .ids(None, Some(shard))?
            .into_iter()
            .filter(|id| !kept.contains(id))
            .collect();
        // in bounded records: one delete of millions of ids would exceed a log record
        for chunk in stale.chunks(STALE_DELETES_PER_RECORD) {
            self.delete(chunk, true)?;
        }
        self.flush()?;
        Ok(kept.len() as u64)
    }
}

/// Hands each page of points of `input` to `sink` up to the end frame, whose count must
/// match the points read.
fn read_pages(input: &mut dyn Read, sink: &mut dyn FnMut(Vec<Point>) -> Result<()>) -> Result<()> {
    let mut points = 0u64;
    loop {
        let (magic, body) = read_frame(input)?;
        match &magic {
            POINTS => {
                let Ok(Operation::Upsert(page)) = codec::try_decode(&body) else {
                    return Err(invalid("a page of points does not decode"));
                };
                points += page.len() as u64;
                sink(page)?;
            }
            END => {
                let count = body
                    .try_into()
                    .map(u64::from_le_bytes)
                    .map_err(|_| invalid("the end frame is not a count"))?;
                if count != points {
                    return Err(invalid(format!(
                        "the snapshot says {count} points but holds {points}"
                    )));
                }
                return Ok(());
            }
            SHARD => {
                return Err(invalid(
                    "a shard snapshot: recover it into its shard, not as a collection",
                ))
            }
            _ => return Err(invalid("a frame that is neither points nor the end")),
        }
    }
}

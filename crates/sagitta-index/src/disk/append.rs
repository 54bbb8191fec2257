//! Updates without a rebuild (issue 15 §5, after SPFresh's LIRE): [`DiskIndex::append`]
//! makes a new index of an index's kept vectors plus new ones, out of place — the old
//! index and its records files stay valid and unchanged until the caller publishes the
//! new one.
//!
//! 1. Each new vector joins the partition of its nearest centroid. Kept vectors stay
//!    where they are, their codes and records untouched.
//! 2. A partition grown past [`SPLIT_ABOVE`] × the target size is split (balanced k-means
//!    of its vectors, read from the records), and then *only the boundary vectors* move
//!    (LIRE's reassignment): the split partition's vectors go to the nearest of the new
//!    centroids and the old centroid's [`NEIGHBORS`] nearest partitions; a neighbor's
//!    vector moves into a new partition if it is nearer its centroid than its own. The
//!    neighbor's vectors are tested on their codes first — `‖x − c‖` is stored exactly,
//!    the distance to a new centroid is estimated with its error bound — and only a vector
//!    whose lower bound beats its own distance is read and decided exactly.
//! 3. A partition shrunk below [`DISSOLVE_BELOW`] × the target size (its vectors deleted)
//!    is dissolved: each vector moves to the nearest of its centroid's neighbors.
//! 4. Vectors that moved, and vectors of split partitions, are coded against their new
//!    centroid; records are never rewritten: only the new vectors' records are written, to
//!    `out`, as one new extent ([`super::extents`]). Extents no kept record lies in any
//!    more are dropped from the new index (the caller may delete their files once the new
//!    index is published).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;

use super::extents::{laid_out, Extent, MAX_EXTENTS};
use super::records::{Element, RecordWriter};
use super::{encode_all, DiskIndex, DiskParams, Encoded, PageReader, Tables};
use crate::error::{IndexError, Result};
use crate::partition;
use crate::rabitq::Rabitq;
use crate::threads::{effective_threads, for_each_chunk};

/// A partition larger than this many times the target size is split.
pub const SPLIT_ABOVE: usize = 2;
/// A partition smaller than the target size divided by this is dissolved.
pub const DISSOLVE_BELOW: usize = 4;
/// Partitions around a split or dissolved one whose vectors may move.
pub const NEIGHBORS: usize = 8;
/// Passes over the partitions looking for ones to split.
const SPLIT_PASSES: usize = 4;
/// Records read at once when a partition's vectors are loaded.
const READ_CHUNK: usize = 1_024;

/// Where a position of an appended index comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Position of the previous index.
    Kept(u32),
    /// Row of the appended vectors.
    Added(u32),
}

/// What [`DiskIndex::append`] returns.
#[derive(Debug)]
pub struct AppendOutcome {
    pub index: DiskIndex,
    /// Where each position of `index` comes from.
    pub sources: Vec<Source>,
    /// The previous index's extents `index` still reads, in order: `index`'s extent `j`
    /// is the previous extent `kept_extents[j]`, and its last extent is the new one.
    pub kept_extents: Vec<usize>,
    pub stats: AppendStats,
}

/// What an append did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AppendStats {
    pub added: usize,
    pub splits: usize,
    pub dissolved: usize,
    /// Kept vectors that moved to another partition.
    pub moved: usize,
    /// Kept vectors read from the records (to split, to decide a move, to recode).
    pub read: usize,
    /// Vectors coded again (new ones, moved ones, those of split partitions).
    pub coded: usize,
}

/// A partition being assembled.
struct Part {
    centroid: Vec<f32>,
    /// The previous index's partition whose codes are valid here (its centroid kept).
    coded_by: Option<usize>,
    members: Vec<Source>,
}

/// The state of an append: the partitions, the new rows, and the kept vectors read.
struct Work<'a> {
    index: &'a DiskIndex,
    parts: Vec<Part>,
    /// New rows as the records store them: the caller's f32 rows borrowed, or copied
    /// rounded to f16.
    added: Cow<'a, [f32]>,
    /// Kept vectors read from the records, by previous position.
    loaded: HashMap<u32, Vec<f32>>,
    reader: &'a dyn PageReader,
    params: DiskParams,
    stats: AppendStats,
}

impl DiskIndex {
    /// A new index of the positions `keep` accepts plus the row-major `vectors`, built
    /// as the module describes; the new vectors' records are written to `out` (the new
    /// index's last extent).
    /// `params.partition_size`, `seed` and `threads` apply; the element type and extended
    /// bits stay this index's.
    pub fn append<'a>(
        &'a self,
        keep: &dyn Fn(u32) -> bool,
        vectors: &'a [f32],
        reader: &'a dyn PageReader,
        params: DiskParams,
        out: &mut dyn Write,
    ) -> Result<AppendOutcome> {
        crate::metric::check_batch(vectors, self.dim())?;
        crate::limits::check_range(
            "partition_size",
            params.partition_size,
            1,
            u32::MAX as usize,
        )?;
        let mut work = Work::new(self, keep, vectors, reader, params);
        work.place_added();
        work.split_large()?;
        work.dissolve_small()?;
        work.finish(out)
    }
}

impl<'a> Work<'a> {
    fn new(
        index: &'a DiskIndex,
        keep: &dyn Fn(u32) -> bool,
        vectors: &'a [f32],
        reader: &'a dyn PageReader,
        params: DiskParams,
    ) -> Work<'a> {
        let parts = (0..index.partitions())
            .map(|partition| Part {
                centroid: index.centroid(partition).to_vec(),
                coded_by: Some(partition),
                members: (index.starts[partition]..index.starts[partition + 1])
                    .filter(|position| keep(*position))
                    .map(Source::Kept)
                    .collect(),
            })
            .collect();
        let added = match index.layout.element {
            Element::F32 => Cow::Borrowed(vectors),
            element => {
                let mut rounded = Vec::with_capacity(vectors.len());
                let mut scratch = Vec::new();
                for row in vectors.chunks_exact(index.dim()) {
                    rounded.extend_from_slice(element.stored(row, &mut scratch));
                }
                Cow::Owned(rounded)
            }
        };
        Work {
            index,
            parts,
            added,
            loaded: HashMap::new(),
            reader,
            params,
            stats: AppendStats::default(),
        }
    }

    fn dim(&self) -> usize {
        self.index.dim()
    }

    /// The vector of `source` (a kept one must have been loaded).
    fn vector(&self, source: Source) -> &[f32] {
        match source {
            Source::Added(row) => {
                let dim = self.dim();
                &self.added[row as usize * dim..(row as usize + 1) * dim]
            }
            Source::Kept(position) => &self.loaded[&position],
        }
    }

    /// Step 1: each new row into the partition of its nearest centroid (every core).
    fn place_added(&mut self) {
        let dim = self.dim();
        let rows = self.added.len() / dim;
        self.stats.added = rows;
        if self.parts.is_empty() {
            // an index of no vectors still has a partition; guard anyway
            self.parts.push(Part {
                centroid: vec![0.0; dim],
                coded_by: None,
                members: Vec::new(),
            });
        }
        let mut chosen = vec![0usize; rows];
        let slots: Vec<parking_lot::Mutex<&mut [usize]>> = chosen
            .chunks_mut(256)
            .map(parking_lot::Mutex::new)
            .collect();
        let threads = effective_threads(self.params.threads, slots.len());
        let candidates: Vec<usize> = (0..self.parts.len()).collect();
        let (added, parts) = (&*self.added, &self.parts);
        for_each_chunk(slots.len(), 1, threads, |start, end| {
            for (chunk, slot) in slots.iter().enumerate().take(end).skip(start) {
                let mut slot = slot.lock();
                for (offset, out) in slot.iter_mut().enumerate() {
                    let row = chunk * 256 + offset;
                    let vector = &added[row * dim..(row + 1) * dim];
                    *out = nearest(parts, vector, &candidates).expect("a part at least");
                }
            }
            Ok::<(), IndexError>(())
        })
        .expect("nothing fails");
        drop(slots);
        for (row, part) in chosen.into_iter().enumerate() {
            let row = u32::try_from(row).expect("rows < 2^32");
            self.parts[part].members.push(Source::Added(row));
        }
    }

    /// The part among `candidates` whose centroid is nearest `vector` (the lowest index
    /// on ties).
    fn nearest_of(&self, vector: &[f32], candidates: &[usize]) -> Option<usize> {
        nearest(&self.parts, vector, candidates)
    }

    /// The `NEIGHBORS` non-empty parts other than `part` whose centroids are nearest its.
    fn neighbors(&self, part: usize) -> Vec<usize> {
        let centroid = &self.parts[part].centroid;
        let mut ranked: Vec<(f32, usize)> = (0..self.parts.len())
            .filter(|other| *other != part && !self.parts[*other].members.is_empty())
            .map(|other| {
                let d = l2(centroid, &self.parts[other].centroid);
                (d, other)
            })
            .collect();
        ranked.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        ranked.truncate(NEIGHBORS);
        ranked.into_iter().map(|(_, other)| other).collect()
    }

    /// Reads the records of the kept `sources` not read yet.
    fn load(&mut self, sources: &[Source]) -> Result<()> {
        let wanted: Vec<u32> = sources
            .iter()
            .filter_map(|source| match source {
                Source::Kept(position) if !self.loaded.contains_key(position) => Some(*position),
                _ => None,
            })
            .collect();
        for chunk in wanted.chunks(READ_CHUNK) {
            let vectors = self.index.vectors(chunk, self.reader)?;
            self.stats.read += chunk.len();
            self.loaded.extend(chunk.iter().copied().zip(vectors));
        }
        Ok(())
    }

    /// Step 2: splits every part above `SPLIT_ABOVE` × the target, then reassigns the
    /// boundary vectors around it.
    /// Passes over the parts until none is too large (a reassignment may grow a part
    /// already passed), at most `SPLIT_PASSES` of them.
    fn split_large(&mut self) -> Result<()> {
        let target = self.params.partition_size;
        let limit = target.saturating_mul(SPLIT_ABOVE);
        for _ in 0..SPLIT_PASSES {
            let mut split_any = false;
            let mut part = 0;
            while part < self.parts.len() {
                if self.parts[part].members.len() > limit {
                    split_any |= self.split(part)?;
                }
                part += 1;
            }
            if !split_any {
                break;
            }
        }
        Ok(())
    }

    /// Splits `part` by balanced k-means and reassigns the boundary vectors around it;
    /// false when its vectors would not split (all alike).
    fn split(&mut self, part: usize) -> Result<bool> {
        let dim = self.dim();
        let members = std::mem::take(&mut self.parts[part].members);
        self.load(&members)?;
        let mut rows = Vec::with_capacity(members.len() * dim);
        for source in &members {
            rows.extend_from_slice(self.vector(*source));
        }
        let seed = self.params.seed ^ (part as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let split = partition::balanced(&rows, dim, self.params.partition_size, seed, 1)?;
        if split.len() < 2 {
            self.parts[part].members = members;
            return Ok(false);
        }
        let neighbors = self.neighbors(part);
        // the first new partition takes the old one's place, the others go last
        let mut new_parts = vec![part];
        for number in 0..split.len() {
            let centroid = split.centroid(number).to_vec();
            if number == 0 {
                self.parts[part].centroid = centroid;
                self.parts[part].coded_by = None;
            } else {
                new_parts.push(self.parts.len());
                self.parts.push(Part {
                    centroid,
                    coded_by: None,
                    members: Vec::new(),
                });
            }
        }
        self.stats.splits += 1;
        // the split partition's vectors: the part the balanced split gave them, unless a
        // neighbor's centroid is nearer still
        for (number, new_part) in new_parts.iter().enumerate() {
            for row in split.members(number) {
                let source = members[*row as usize];
                let vector = self.vector(source);
                let own = l2(vector, &self.parts[*new_part].centroid);
                let destination = match self.nearest_of(vector, &neighbors) {
                    Some(nearest) if l2(vector, &self.parts[nearest].centroid) < own => {
                        self.stats.moved += usize::from(matches!(source, Source::Kept(_)));
                        nearest
                    }
                    _ => *new_part,
                };
                self.parts[destination].members.push(source);
            }
        }
        for neighbor in neighbors {
            self.reassign_boundary(neighbor, &new_parts)?;
        }
        Ok(true)
    }

    /// Moves into `new_parts` the vectors of `neighbor` nearer one of their centroids than
    /// their own: screened on their codes where the codes are valid, decided exactly.
    fn reassign_boundary(&mut self, neighbor: usize, new_parts: &[usize]) -> Result<()> {
        let index = self.index;
        let coded_by = self.parts[neighbor].coded_by;
        let prepared: Vec<_> = coded_by
            .map(|old| {
                new_parts
                    .iter()
                    .map(|new| {
                        index
                            .quantizer
                            .query(&self.parts[*new].centroid, index.centroid(old))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let suspects: Vec<Source> = self.parts[neighbor]
            .members
            .iter()
            .copied()
            .filter(|source| match (source, coded_by) {
                (Source::Kept(position), Some(_)) if !self.loaded.contains_key(position) => {
                    let p = *position as usize;
                    let own = index.factors[p].norm * index.factors[p].norm;
                    prepared.iter().any(|query| {
                        let (estimate, bound) =
                            query.estimate(&index.quantizer, index.code(p), index.factors[p]);
                        estimate - bound < own
                    })
                }
                _ => true,
            })
            .collect();
        self.load(&suspects)?;
        let own_centroid = self.parts[neighbor].centroid.clone();
        let mut moves = Vec::new();
        for source in suspects {
            let vector = self.vector(source);
            let own = l2(vector, &own_centroid);
            let nearest = self
                .nearest_of(vector, new_parts)
                .expect("a split makes parts");
            if l2(vector, &self.parts[nearest].centroid) < own {
                moves.push((source, nearest));
            }
        }
        for (source, target) in moves {
            self.parts[neighbor]
                .members
                .retain(|member| *member != source);
            self.parts[target].members.push(source);
            self.stats.moved += usize::from(matches!(source, Source::Kept(_)));
        }
        Ok(())
    }

    /// Step 3: dissolves every non-empty part below the target / `DISSOLVE_BELOW` (while
    /// another part remains).
    fn dissolve_small(&mut self) -> Result<()> {
        let floor = self.params.partition_size / DISSOLVE_BELOW;
        for part in 0..self.parts.len() {
            let size = self.parts[part].members.len();
            if size == 0 || size >= floor {
                continue;
            }
            let neighbors = self.neighbors(part);
            if neighbors.is_empty() {
                continue;
            }
            let members = std::mem::take(&mut self.parts[part].members);
            self.load(&members)?;
            for source in members {
                let nearest = self
                    .nearest_of(self.vector(source), &neighbors)
                    .expect("neighbors checked non-empty");
                self.parts[nearest].members.push(source);
                self.stats.moved += usize::from(matches!(source, Source::Kept(_)));
            }
            self.stats.dissolved += 1;
        }
        Ok(())
    }

    /// Whether `source`'s code in the previous index is valid in part `part`.
    fn code_valid(&self, source: Source, part: &Part) -> bool {
        match source {
            Source::Kept(position) => part.coded_by == Some(self.index.partition_of(position)),
            Source::Added(_) => false,
        }
    }

    /// Step 4: codes what needs coding, writes the new records, assembles the index.
    fn finish(mut self, out: &mut dyn Write) -> Result<AppendOutcome> {
        let index = self.index;
        self.parts.retain(|part| !part.members.is_empty());
        let (coded, coded_norms) = self.code_again()?;
        let order: Vec<Source> = self.parts.iter().flat_map(|p| p.members.clone()).collect();
        let (extents, remap) = surviving_extents(index, &order)?;
        // the new extent: every added row, in the new position order
        let added_count = order
            .iter()
            .filter(|source| matches!(source, Source::Added(_)))
            .count();
        let mut new_addresses = laid_out(index.layout, &[added_count], extents.len()).into_iter();
        let mut writer = RecordWriter::new(out, index.layout, &[added_count])?;
        writer.next_partition()?;
        let mut encoded = Encoded::empty(index.extra_bits);
        let mut sq_norms = Vec::with_capacity(order.len());
        let mut addresses = Vec::with_capacity(order.len());
        let mut next_coded = 0usize;
        for part in &self.parts {
            for source in &part.members {
                match *source {
                    Source::Kept(position) if self.code_valid(*source, part) => {
                        encoded.push_from_index(index, position as usize);
                        sq_norms.push(index.sq_norms[position as usize]);
                    }
                    _ => {
                        encoded.push_from(&coded, next_coded);
                        sq_norms.push(coded_norms[next_coded]);
                        next_coded += 1;
                    }
                }
                addresses.push(match *source {
                    Source::Kept(position) => {
                        let address = index.addresses[position as usize];
                        address.in_extent(remap[address.extent()].expect("a surviving extent"))
                    }
                    Source::Added(_) => {
                        writer.push(self.vector(*source))?;
                        new_addresses.next().expect("an address a new record")
                    }
                });
            }
        }
        let header = writer.finish()?;
        let mut extents = extents;
        extents.push(Extent {
            records: header.records,
            pages: header.pages,
        });
        let appended = self.assemble(extents, addresses, encoded, sq_norms)?;
        Ok(AppendOutcome {
            index: appended,
            sources: order,
            kept_extents: (0..remap.len())
                .filter(|old| remap[*old].is_some())
                .collect(),
            stats: self.stats,
        })
    }

    /// The new index of the parts, its records where `addresses` say.
    fn assemble(
        &self,
        extents: Vec<Extent>,
        addresses: Vec<super::extents::Address>,
        encoded: Encoded,
        sq_norms: Vec<f32>,
    ) -> Result<DiskIndex> {
        let index = self.index;
        let sizes: Vec<usize> = self.parts.iter().map(|p| p.members.len()).collect();
        let tables = Tables {
            centroids: self.parts.iter().flat_map(|p| p.centroid.clone()).collect(),
            starts: super::partition_starts(&sizes),
            extents,
            addresses,
        };
        let appended = DiskIndex::assemble(
            index.metric,
            Rabitq::clone(&index.quantizer),
            index.layout.element,
            tables,
            encoded,
            sq_norms,
        );
        appended.check_tables()?;
        Ok(appended)
    }

    /// Codes (on every core) each member whose code is not valid where it now is, part by
    /// part in member order; returns the codes and squared norms in that order.
    fn code_again(&mut self) -> Result<(Encoded, Vec<f32>)> {
        let (index, dim) = (self.index, self.dim());
        let recode: Vec<Vec<Source>> = self
            .parts
            .iter()
            .map(|part| {
                part.members
                    .iter()
                    .copied()
                    .filter(|source| !self.code_valid(*source, part))
                    .collect()
            })
            .collect();
        let all: Vec<Source> = recode.iter().flatten().copied().collect();
        self.load(&all)?;
        self.stats.coded = all.len();
        let mut rows = Vec::with_capacity(all.len() * dim);
        let mut local = Vec::with_capacity(recode.len());
        for sources in &recode {
            let start = u32::try_from(rows.len() / dim).expect("rows < 2^32");
            for source in sources {
                rows.extend_from_slice(self.vector(*source));
            }
            let end = u32::try_from(rows.len() / dim).expect("rows < 2^32");
            local.push((start..end).collect::<Vec<u32>>());
        }
        let centroids: Vec<f32> = self.parts.iter().flat_map(|p| p.centroid.clone()).collect();
        let params = DiskParams {
            extra_bits: index.extra_bits,
            element: index.layout.element,
            ..self.params
        };
        encode_all(&index.quantizer, &rows, &centroids, &local, params)
    }
}

/// The extents a kept record still lies in, in their order, and each old extent's new
/// number (`None`: dropped).
fn surviving_extents(
    index: &DiskIndex,
    order: &[Source],
) -> Result<(Vec<Extent>, Vec<Option<usize>>)> {
    let mut used = vec![false; index.extents.len()];
    for source in order {
        if let Source::Kept(position) = source {
            used[index.addresses[*position as usize].extent()] = true;
        }
    }
    let mut remap = vec![None; used.len()];
    let mut extents = Vec::new();
    for (old, extent) in index.extents.iter().enumerate() {
        if used[old] {
            remap[old] = Some(extents.len());
            extents.push(*extent);
        }
    }
    if extents.len() >= MAX_EXTENTS {
        return Err(IndexError::format(format!(
            "disk index: an append would make {} extents, at most {MAX_EXTENTS}",
            extents.len() + 1
        )));
    }
    Ok((extents, remap))
}

impl Encoded {
    /// Appends position `position`'s stored codes of `index`.
    fn push_from_index(&mut self, index: &DiskIndex, position: usize) {
        self.codes.extend_from_slice(index.code(position));
        self.factors.push(index.factors[position]);
        self.extra_codes
            .extend_from_slice(index.extra_code(position));
        if index.extra_bits > 0 {
            self.extra_fits.push(index.extra_fits[position]);
        }
    }

    /// Appends entry `entry` of `other`.
    fn push_from(&mut self, other: &Encoded, entry: usize) {
        let words = other.codes.len() / other.factors.len().max(1);
        let extra_words = other.extra_codes.len() / other.factors.len().max(1);
        self.codes
            .extend_from_slice(&other.codes[entry * words..(entry + 1) * words]);
        self.factors.push(other.factors[entry]);
        self.extra_codes
            .extend_from_slice(&other.extra_codes[entry * extra_words..(entry + 1) * extra_words]);
        if other.extra_bits > 0 {
            self.extra_fits.push(other.extra_fits[entry]);
        }
    }
}

/// Squared L2 distance: partitions are by L2 whatever the metric, as the build makes them.
fn l2(a: &[f32], b: &[f32]) -> f32 {
    (sagitta_kernels::kernels().l2_squared_f32)(a, b)
}

/// The part among `candidates` whose centroid is nearest `vector` (the lowest index on
/// ties); `None` when there are no candidates.
fn nearest(parts: &[Part], vector: &[f32], candidates: &[usize]) -> Option<usize> {
    candidates
        .iter()
        .map(|part| (l2(vector, &parts[*part].centroid), *part))
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
        .map(|(_, part)| part)
}

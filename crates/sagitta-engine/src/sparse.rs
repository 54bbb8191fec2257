//! Sparse vectors (issue 16 §1): a point's weights over a vocabulary of u32 indices (a
//! bag of words, SPLADE, BM25 term weights), scored against a query by the dot product
//! over the indices both have — Qdrant's sparse vectors. A point whose vector shares no
//! index with the query is not a hit at all (it has no score), as in Qdrant.
//!
//! Stored sorted by index, each index once. A sealed segment keeps an inverted index per
//! sparse space ([`SparseIndex`]): per vocabulary index, the positions that have it and
//! their weights, so a query touches only the postings of its own indices. With the IDF
//! modifier a query's weights are multiplied by each index's inverse document frequency
//! over the collection's live points ([`idf`]) before scoring, as Qdrant does.

use std::cell::RefCell;
use std::collections::HashMap;

/// Most non-zero entries one sparse vector may have.
pub const MAX_SPARSE_ENTRIES: usize = 1 << 20;

/// A sparse vector: ascending, distinct indices and their finite weights.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SparseVector {
    indices: Vec<u32>,
    values: Vec<f32>,
}

impl SparseVector {
    /// The vector of `indices` and `values` (any order), sorted by index; or why not:
    /// lengths differ, an index given twice, a weight not finite, too many entries.
    pub fn new(indices: Vec<u32>, values: Vec<f32>) -> Result<SparseVector, String> {
        if indices.len() != values.len() {
            return Err(format!(
                "{} indices and {} values: a sparse vector needs one value per index",
                indices.len(),
                values.len()
            ));
        }
        if indices.len() > MAX_SPARSE_ENTRIES {
            return Err(format!(
                "{} entries, more than the limit of {MAX_SPARSE_ENTRIES}",
                indices.len()
            ));
        }
        if let Some(position) = values.iter().position(|value| !value.is_finite()) {
            return Err(format!("values[{position}] is not a finite number"));
        }
        let mut pairs: Vec<(u32, f32)> = indices.into_iter().zip(values).collect();
        pairs.sort_by_key(|pair| pair.0);
        if let Some(pair) = pairs.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(format!("index {} is given twice", pair[0].0));
        }
        Ok(SparseVector {
            indices: pairs.iter().map(|pair| pair.0).collect(),
            values: pairs.iter().map(|pair| pair.1).collect(),
        })
    }

    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    pub fn values(&self) -> &[f32] {
        &self.values
    }

    pub fn len(&self) -> usize {
        self.indices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// The dot product over the indices both vectors have; `None` when they share none.
    pub fn dot(&self, other: &SparseVector) -> Option<f32> {
        let (mut i, mut j) = (0, 0);
        let mut sum = 0.0f32;
        let mut shared = false;
        while i < self.indices.len() && j < other.indices.len() {
            match self.indices[i].cmp(&other.indices[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    sum += self.values[i] * other.values[j];
                    shared = true;
                    i += 1;
                    j += 1;
                }
            }
        }
        shared.then_some(sum)
    }

    /// The same indices with each weight multiplied by `weight(index)`.
    pub fn reweighted(&self, weight: impl Fn(u32) -> f32) -> SparseVector {
        SparseVector {
            indices: self.indices.clone(),
            values: self
                .indices
                .iter()
                .zip(&self.values)
                .map(|(index, value)| value * weight(*index))
                .collect(),
        }
    }

    /// Heap bytes of the vector.
    pub fn bytes(&self) -> usize {
        8 * self.indices.len()
    }
}

/// The inverse document frequency of an index found in `df` of `n` points — BM25's,
/// as Qdrant computes it: ln((n − df + 0.5) / (df + 0.5) + 1).
pub fn idf(df: usize, n: usize) -> f32 {
    #[allow(clippy::cast_precision_loss)]
    let (df, n) = (df as f64, n as f64);
    #[allow(clippy::cast_possible_truncation)]
    let value = ((n - df + 0.5) / (df + 0.5) + 1.0).ln() as f32;
    value
}

/// An inverted index over one sparse space of a segment: per vocabulary index, the
/// positions having it (ascending) with their weights.
#[derive(Default)]
pub(crate) struct SparseIndex {
    postings: HashMap<u32, Vec<(u32, f32)>>,
    /// Positions of the segment (the bound of every posting's position).
    positions: usize,
}

/// A thread's accumulator for [`SparseIndex::for_each_score`]: a score per position and
/// a bit per position touched, kept between queries and left zeroed after each (a
/// query interrupted by a panic leaves it `dirty`, and the next one clears it whole).
#[derive(Default)]
struct Accumulator {
    scores: Vec<f32>,
    touched: Vec<u64>,
    dirty: bool,
}

impl Accumulator {
    /// Room for `positions`, all zero.
    fn prepare(&mut self, positions: usize) {
        if self.dirty {
            self.scores.fill(0.0);
            self.touched.fill(0);
        }
        if self.scores.len() < positions {
            self.scores.resize(positions, 0.0);
            self.touched.resize(positions.div_ceil(64), 0);
        }
    }
}

/// Segments of more positions than this score into an accumulator of their own, made
/// and dropped per query, so no thread keeps more than 5 bytes times this (20 MiB).
const CACHED_POSITIONS: usize = 1 << 22;

thread_local! {
    static ACCUMULATOR: RefCell<Accumulator> = RefCell::new(Accumulator::default());
}

impl SparseIndex {
    /// The index of `vectors`, position `i` being `vectors[i]` (`None`: no vector there).
    pub fn build<'a>(vectors: impl Iterator<Item = Option<&'a SparseVector>>) -> SparseIndex {
        let mut postings: HashMap<u32, Vec<(u32, f32)>> = HashMap::new();
        let mut positions = 0;
        for (position, vector) in vectors.enumerate() {
            positions = position + 1;
            let Some(vector) = vector else { continue };
            let position = u32::try_from(position).expect("segment size");
            for (index, value) in vector.indices.iter().zip(&vector.values) {
                postings.entry(*index).or_default().push((position, *value));
            }
        }
        SparseIndex {
            postings,
            positions,
        }
    }

    /// Positions passing `keep` that have `index`.
    pub fn document_frequency(&self, index: u32, keep: impl Fn(u32) -> bool) -> usize {
        self.postings.get(&index).map_or(0, |list| {
            list.iter().filter(|(position, _)| keep(*position)).count()
        })
    }

    /// Positions that have `index`, deleted or not (a segment without deletions: its
    /// document frequency without a pass over the postings).
    pub fn posting_len(&self, index: u32) -> usize {
        self.postings.get(&index).map_or(0, Vec::len)
    }

    /// Calls `visit(position, dot product)` for each position that shares an index
    /// with `query`, in position order: the postings of the query's indices added up in
    /// a dense array of scores with a touched bit each (no hashing, no branch per
    /// posting). `visit` decides what to keep, so a caller that checks a bound first
    /// asks its filter only about positions that could be kept.
    pub fn for_each_score(&self, query: &SparseVector, visit: impl FnMut(u32, f32)) {
        if self.positions > CACHED_POSITIONS {
            // a thread keeps no accumulator this large: zeroed pages, mapped on touch
            let mut accumulator = Accumulator::default();
            accumulator.prepare(self.positions);
            self.accumulate(&mut accumulator, query, visit);
            return;
        }
        ACCUMULATOR.with(|accumulator| {
            let mut accumulator = accumulator.borrow_mut();
            accumulator.prepare(self.positions);
            self.accumulate(&mut accumulator, query, visit);
        });
    }

    /// [`SparseIndex::for_each_score`] into `accumulator` (prepared for this segment),
    /// left zeroed again.
    fn accumulate(
        &self,
        accumulator: &mut Accumulator,
        query: &SparseVector,
        mut visit: impl FnMut(u32, f32),
    ) {
        accumulator.dirty = true;
        let Accumulator {
            scores, touched, ..
        } = accumulator;
        for (index, weight) in query.indices.iter().zip(&query.values) {
            let Some(postings) = self.postings.get(index) else {
                continue;
            };
            for &(position, value) in postings {
                let at = position as usize;
                scores[at] += weight * value;
                touched[at >> 6] |= 1u64 << (at & 63);
            }
        }
        for (word_at, word) in touched.iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let at = word_at * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let score = std::mem::take(&mut scores[at]);
                visit(u32::try_from(at).expect("segment size"), score);
            }
        }
        accumulator.dirty = false;
    }

    /// Heap bytes of the postings (entries only).
    pub fn bytes(&self) -> usize {
        self.postings.values().map(|list| 8 * list.len() + 32).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sparse(indices: &[u32], values: &[f32]) -> SparseVector {
        SparseVector::new(indices.to_vec(), values.to_vec()).unwrap()
    }

    #[test]
    fn vectors_are_sorted_and_checked() {
        let vector = sparse(&[7, 1, 3], &[0.5, 1.0, -2.0]);
        assert_eq!(vector.indices(), &[1, 3, 7]);
        assert_eq!(vector.values(), &[1.0, -2.0, 0.5]);
        let error = |indices: &[u32], values: &[f32]| {
            SparseVector::new(indices.to_vec(), values.to_vec()).unwrap_err()
        };
        assert!(error(&[1, 2], &[1.0]).contains("2 indices and 1 values"));
        assert!(error(&[4, 2, 4], &[1.0, 1.0, 1.0]).contains("index 4 is given twice"));
        assert!(error(&[1, 2], &[1.0, f32::NAN]).contains("values[1]"));
        assert!(sparse(&[], &[]).is_empty());
    }

    #[test]
    fn dot_products_only_where_indices_meet() {
        let a = sparse(&[1, 3, 5], &[1.0, 2.0, 3.0]);
        let b = sparse(&[3, 5, 9], &[10.0, 1.0, 4.0]);
        assert_eq!(a.dot(&b), Some(23.0));
        assert_eq!(a.dot(&sparse(&[2, 4], &[1.0, 1.0])), None);
        // a shared index with a zero product still makes a hit
        assert_eq!(a.dot(&sparse(&[1], &[0.0])), Some(0.0));
    }

    #[test]
    fn the_inverted_index_agrees_with_pairwise_dot_products() {
        let vectors = [
            Some(sparse(&[1, 2, 3], &[1.0, 2.0, 3.0])),
            None,
            Some(sparse(&[3, 4], &[0.5, 1.0])),
            Some(sparse(&[9], &[1.0])),
        ];
        let index = SparseIndex::build(vectors.iter().map(Option::as_ref));
        let query = sparse(&[3, 4, 8], &[2.0, 1.0, 5.0]);
        let scores_of = |index: &SparseIndex| {
            let mut scores = HashMap::new();
            index.for_each_score(&query, |position, score| {
                scores.insert(position, score);
            });
            scores
        };
        let scores = scores_of(&index);
        for (position, vector) in vectors.iter().enumerate() {
            let expected = vector.as_ref().and_then(|vector| vector.dot(&query));
            assert_eq!(
                scores.get(&(position as u32)).copied(),
                expected,
                "{position}"
            );
        }
        // the accumulator is left zeroed: the same query again gives the same scores
        assert_eq!(scores_of(&index), scores);
        assert_eq!(index.document_frequency(3, |_| true), 2);
        assert_eq!(index.document_frequency(3, |position| position == 2), 1);
    }

    #[test]
    fn a_segment_too_large_for_the_thread_accumulator_scores_alike() {
        let far = sparse(&[3, 4], &[0.5, 1.0]);
        let vectors =
            std::iter::repeat_n(None, CACHED_POSITIONS).chain([Some(&far), None, Some(&far)]);
        let index = SparseIndex::build(vectors);
        let query = sparse(&[4], &[2.0]);
        let mut seen = Vec::new();
        index.for_each_score(&query, |position, score| seen.push((position, score)));
        let first = u32::try_from(CACHED_POSITIONS).unwrap();
        assert_eq!(seen, vec![(first, 2.0), (first + 2, 2.0)]);
        // the thread's own accumulator is untouched: a small index after it starts clean
        let small = SparseIndex::build([Some(&far)].into_iter());
        let mut again = Vec::new();
        small.for_each_score(&query, |position, score| again.push((position, score)));
        assert_eq!(again, vec![(0, 2.0)]);
    }

    #[test]
    fn idf_is_bm25s() {
        // ln((10 - 2 + 0.5) / (2 + 0.5) + 1) = ln(4.4)
        assert!((idf(2, 10) - 4.4f32.ln()).abs() < 1e-6);
        assert!(idf(0, 10) > idf(5, 10));
    }
}

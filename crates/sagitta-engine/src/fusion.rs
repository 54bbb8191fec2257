//! Fusion of several ranked hit lists into one (hybrid search: a dense and a sparse
//! search of the same points, fused). Shared by the server's Query API (`prefetch` with
//! `{"fusion": ..}`) and the embedded Python API's `hybrid_search`, so both rank alike.
//!
//! Reciprocal rank fusion scores a point Σ 1 / (k + rank) over the lists that hold it
//! (ranks from 0, as qdrant-client's local mode counts them; Qdrant's default k is 2).
//! Distribution-based score fusion maps each list's scores from mean ± 3 standard
//! deviations (sample deviation) onto 0..1 and adds them.

use std::collections::HashMap;

use crate::point::PointId;
use crate::query::ScoredPoint;

/// How ranked lists are fused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fusion {
    Rrf { k: f64 },
    Dbsf,
}

/// Qdrant's default RRF constant.
pub const DEFAULT_RRF_K: f64 = 2.0;

/// The page of a fused ranking to return.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FusedPage {
    pub limit: usize,
    pub offset: usize,
    /// Fused scores below this are dropped.
    pub score_threshold: Option<f32>,
}

/// The lists' hits fused, best first (ties by id), the threshold applied, `offset`
/// skipped and `limit` kept. A point found by several lists keeps the stored data of
/// its first appearance.
pub fn fuse(sources: Vec<Vec<ScoredPoint>>, fusion: Fusion, page: FusedPage) -> Vec<ScoredPoint> {
    let mut scores: HashMap<PointId, f64> = HashMap::new();
    let mut points: HashMap<PointId, ScoredPoint> = HashMap::new();
    for source in sources {
        let contributions = contributions(&source, fusion);
        for (hit, contribution) in source.into_iter().zip(contributions) {
            *scores.entry(hit.id).or_insert(0.0) += contribution;
            points.entry(hit.id).or_insert(hit);
        }
    }
    let mut ranked: Vec<(PointId, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
        .into_iter()
        .take(page.offset + page.limit)
        .filter_map(|(id, score)| {
            let mut point = points.remove(&id)?;
            #[allow(clippy::cast_possible_truncation)]
            let score = score as f32;
            point.score = score;
            Some(point)
        })
        .filter(|point| {
            page.score_threshold
                .is_none_or(|threshold| point.score >= threshold)
        })
        .skip(page.offset)
        .collect()
}

/// What each hit of one list adds to its point's fused score.
fn contributions(source: &[ScoredPoint], fusion: Fusion) -> Vec<f64> {
    match fusion {
        #[allow(clippy::cast_precision_loss)]
        Fusion::Rrf { k } => (0..source.len())
            .map(|rank| 1.0 / (k + rank as f64))
            .collect(),
        Fusion::Dbsf => {
            let scores: Vec<f64> = source.iter().map(|hit| f64::from(hit.score)).collect();
            if scores.len() < 2 {
                return vec![0.5; scores.len()];
            }
            #[allow(clippy::cast_precision_loss)]
            let count = scores.len() as f64;
            let mean = scores.iter().sum::<f64>() / count;
            let variance = scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (count - 1.0);
            if variance == 0.0 {
                return vec![0.5; scores.len()];
            }
            let deviation = variance.sqrt();
            let low = mean - 3.0 * deviation;
            scores
                .iter()
                .map(|score| (score - low) / (6.0 * deviation))
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: u64, score: f32) -> ScoredPoint {
        ScoredPoint {
            id: PointId::Number(id),
            score,
            payload: None,
            vector: Vec::new(),
            side: Vec::new(),
        }
    }

    #[test]
    fn rrf_adds_reciprocal_ranks() {
        let rrf = contributions(
            &[hit(1, 9.0), hit(2, 8.0), hit(3, 7.0)],
            Fusion::Rrf { k: 2.0 },
        );
        // ranks from 0 with k = 2: 1/2, 1/3, 1/4
        assert_eq!(rrf, vec![0.5, 1.0 / 3.0, 0.25]);
    }

    #[test]
    fn dbsf_maps_three_deviations_onto_the_unit_interval() {
        let dbsf = contributions(&[hit(1, 3.0), hit(2, 2.0), hit(3, 1.0)], Fusion::Dbsf);
        // mean 2, sample deviation 1: (s - (2 - 3)) / 6
        assert_eq!(dbsf, vec![4.0 / 6.0, 0.5, 2.0 / 6.0]);
        assert_eq!(contributions(&[hit(1, 3.0)], Fusion::Dbsf), vec![0.5]);
        assert_eq!(
            contributions(&[hit(1, 3.0), hit(2, 3.0)], Fusion::Dbsf),
            vec![0.5, 0.5]
        );
    }

    #[test]
    fn fused_ranking_adds_lists_breaks_ties_by_id_and_pages() {
        let dense = vec![hit(1, 0.9), hit(2, 0.8), hit(3, 0.7)];
        let sparse = vec![hit(3, 5.0), hit(4, 4.0), hit(1, 1.0)];
        let page = FusedPage {
            limit: 10,
            offset: 0,
            score_threshold: None,
        };
        let fused = fuse(
            vec![dense.clone(), sparse.clone()],
            Fusion::Rrf { k: 2.0 },
            page,
        );
        let ids: Vec<PointId> = fused.iter().map(|p| p.id).collect();
        // 1: 1/2 + 1/4, 3: 1/4 + 1/2 (tie, id order), 2: 1/3, 4: 1/3 (tie, id order)
        assert_eq!(ids, [1, 3, 2, 4].map(PointId::Number));
        assert!((fused[0].score - 0.75).abs() < 1e-6);
        assert!((fused[1].score - 0.75).abs() < 1e-6);
        let paged = fuse(
            vec![dense, sparse],
            Fusion::Rrf { k: 2.0 },
            FusedPage {
                limit: 1,
                offset: 1,
                score_threshold: Some(0.5),
            },
        );
        assert_eq!(paged.len(), 1);
        assert_eq!(paged[0].id, PointId::Number(3));
    }
}

//! Where a search's vector comes from, read on the blocking pool: a query by point id
//! takes the point's dense, sparse or multi vector (from `lookup_from`'s collection or this
//! one), a recommendation its examples' vectors; this collection's points named that way
//! are left out of the results.

use sagitta_engine::{PointId, SideVector};

use crate::error::{ApiError, ApiResult};
use crate::points::{
    mean, without_point, without_points, Example, QueryTarget, Search, SearchVector,
};
use crate::recommend::{side_average, ExampleScoring, ExampleVector};
use crate::wire::{unknown_vector_name, DEFAULT_VECTOR_NAME};

impl QueryTarget<'_> {
    /// The vector `search` runs with, and the search: for a query by point id, the
    /// point's vector, and the point itself left out of the results when it is one of
    /// this collection's.
    pub fn resolve(
        &self,
        vector: SearchVector,
        mut search: Search,
    ) -> ApiResult<(Vec<f32>, Search)> {
        match vector {
            SearchVector::Given(vector) => Ok((vector, search)),
            SearchVector::Side(vector) => {
                search.side = Some(vector);
                Ok((Vec::new(), search))
            }
            SearchVector::Prefetch { .. } | SearchVector::Fusion(_) => {
                unreachable!("prefetches are evaluated by QueryTarget::evaluate")
            }
            SearchVector::Point {
                id,
                lookup_from,
                field,
            } => self.by_point(id, (lookup_from.as_deref(), &field), search),
            SearchVector::Recommend {
                positive,
                negative,
                strategy,
                lookup_from,
                field,
            } => {
                let from = (lookup_from.as_deref(), field.as_str());
                self.recommend((positive, negative), strategy, from, search)
            }
        }
    }

    /// `recommend`'s query: with a scoring strategy, a scan scoring every point against
    /// the examples ([`crate::recommend`]); else a search for the examples' average
    /// (dense: 2 × mean of positives − mean of negatives; sparse or multi:
    /// [`side_average`]).
    fn recommend(
        &self,
        (positive, negative): (Vec<Example>, Vec<Example>),
        strategy: Option<crate::recommend::ScoreStrategy>,
        from: (Option<&str>, &str),
        mut search: Search,
    ) -> ApiResult<(Vec<f32>, Search)> {
        let field = from.1;
        let positive = self.example_vectors(positive, from, &mut search)?;
        let negative = self.example_vectors(negative, from, &mut search)?;
        let dims = positive
            .iter()
            .chain(&negative)
            .filter_map(|example| match example {
                ExampleVector::Dense(vector) => Some(vector.len()),
                ExampleVector::Side(_) => None,
            });
        if dims.clone().min() != dims.max() {
            return Err(ApiError::bad_request(format!(
                "Wrong input: `{field}query.recommend`: examples of different dimensions"
            )));
        }
        if let Some(strategy) = strategy {
            search.scoring = Some(ExampleScoring {
                strategy,
                positive,
                negative,
            });
            return Ok((Vec::new(), search));
        }
        let side = |example: &ExampleVector| matches!(example, ExampleVector::Side(_));
        let examples = || positive.iter().chain(&negative);
        if examples().any(side) {
            if !examples().all(side) {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `{field}query.recommend`: examples of different kinds"
                )));
            }
            let (positive, negative) = (side_vectors(positive), side_vectors(negative));
            search.side = Some(side_average(&positive, &negative, field)?);
            return Ok((Vec::new(), search));
        }
        let (positive, negative) = (dense_vectors(positive), dense_vectors(negative));
        let positive = mean(&positive);
        #[allow(clippy::cast_possible_truncation)]
        let vector = if negative.is_empty() {
            positive.iter().map(|p| *p as f32).collect()
        } else {
            let negative = mean(&negative);
            positive
                .iter()
                .zip(&negative)
                .map(|(p, n)| (2.0 * p - n) as f32)
                .collect()
        };
        Ok((vector, search))
    }

    /// A query by point `id` (read from `lookup_from`'s collection, else this one): the
    /// point's vector, dense or sparse, and the point left out when it is this
    /// collection's.
    fn by_point(
        &self,
        id: PointId,
        (lookup_from, field): (Option<&str>, &str),
        mut search: Search,
    ) -> ApiResult<(Vec<f32>, Search)> {
        let (vector, same_collection) =
            self.point_vector(id, lookup_from, field, search.source_vector())?;
        if same_collection {
            search.filter = Some(without_point(search.filter.take(), id));
        }
        match vector {
            Looked::Dense(vector) => Ok((vector, search)),
            Looked::Side(vector) => {
                search.side = Some(vector);
                Ok((Vec::new(), search))
            }
        }
    }

    /// The vectors of recommendation `examples`; examples by id are read from
    /// `lookup_from` (else this collection) and, when they are this collection's, left out
    /// of `search`'s results. `field` prefixes errors.
    fn example_vectors(
        &self,
        examples: Vec<Example>,
        (lookup_from, field): (Option<&str>, &str),
        search: &mut Search,
    ) -> ApiResult<Vec<ExampleVector>> {
        let mut mentioned = Vec::new();
        let vectors = examples
            .into_iter()
            .map(|example| match example {
                Example::Vector(vector) => Ok(vector),
                Example::Point(id) => {
                    let (vector, same) =
                        self.point_vector(id, lookup_from, field, search.source_vector())?;
                    if same {
                        mentioned.push(id);
                    }
                    Ok(match vector {
                        Looked::Dense(vector) => ExampleVector::Dense(vector),
                        Looked::Side(vector) => ExampleVector::Side(vector),
                    })
                }
            })
            .collect::<ApiResult<Vec<_>>>()?;
        if !mentioned.is_empty() {
            search.filter = Some(without_points(search.filter.take(), mentioned));
        }
        Ok(vectors)
    }

    /// The vector `using` names of point `id`, from collection `lookup_from` (else this
    /// one), and whether the point is one of this collection's.
    fn point_vector(
        &self,
        id: PointId,
        lookup_from: Option<&str>,
        field: &str,
        (using, named_by): (Option<&str>, &str),
    ) -> ApiResult<(Looked, bool)> {
        let source = match lookup_from {
            None => None,
            Some(name) => Some(
                self.database
                    .collection(name)
                    .map_err(|_| ApiError::collection_not_found(name))?,
            ),
        };
        let source_name = lookup_from.unwrap_or(self.name);
        let source_collection = source.as_deref().unwrap_or(self.collection);
        let point = source_collection
            .get(&id)
            .map_err(|error| ApiError::from_engine(error, source_name))?
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "Not found: `{field}query`: no point with id {id} in collection \
                     `{source_name}`"
                ))
            })?;
        let same = source_name == self.name;
        let spaces = source_collection.spaces();
        let name = using.unwrap_or(DEFAULT_VECTOR_NAME);
        let lacking = || {
            ApiError::bad_request(format!(
                "Wrong input: `{field}query`: point {id} of collection `{source_name}` has no \
                 vector named {name:?}"
            ))
        };
        if !spaces.is_named() {
            if name != DEFAULT_VECTOR_NAME {
                return Err(unknown_vector_name(&format!("{field}{named_by}"), name));
            }
            if sagitta_engine::spaces::is_absent(&point.vector) {
                return Err(lacking());
            }
            return Ok((Looked::Dense(point.vector), same));
        }
        if let Some(index) = spaces.side_index_of(name) {
            let mut side = point.side;
            let vector = side.get_mut(index).and_then(Option::take);
            return Ok((Looked::Side(vector.ok_or_else(lacking)?), same));
        }
        let index = spaces
            .index_of(name)
            .ok_or_else(|| unknown_vector_name(&format!("{field}{named_by}"), name))?;
        let part = spaces
            .part(index, &point.vector)
            .map(<[f32]>::to_vec)
            .ok_or_else(lacking)?;
        Ok((Looked::Dense(part), same))
    }
}

/// The dense examples' vectors.
fn dense_vectors(examples: Vec<ExampleVector>) -> Vec<Vec<f32>> {
    let dense = examples.into_iter().filter_map(|example| match example {
        ExampleVector::Dense(vector) => Some(vector),
        ExampleVector::Side(_) => None,
    });
    dense.collect()
}

/// The sparse or multi examples' vectors.
fn side_vectors(examples: Vec<ExampleVector>) -> Vec<SideVector> {
    let side = examples.into_iter().filter_map(|example| match example {
        ExampleVector::Side(vector) => Some(vector),
        ExampleVector::Dense(_) => None,
    });
    side.collect()
}

/// A stored point's vector read for a query: dense, or a sparse or multi vector.
enum Looked {
    Dense(Vec<f32>),
    Side(SideVector),
}

//! Geo shapes of filter conditions beside `geo_radius`: Qdrant's `geo_bounding_box` and
//! `geo_polygon`, parsed from their JSON and tested against a payload's `{"lat", "lon"}`
//! objects. Both are strict, as Qdrant's server is: a point on an edge is outside.

use serde_json::Value;

/// A geo field that is wrong: its path below the condition's and why.
#[derive(Debug)]
pub(crate) struct GeoError {
    pub field: String,
    pub reason: String,
}

fn error(field: impl Into<String>, reason: impl Into<String>) -> GeoError {
    GeoError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// A point as (longitude, latitude) in degrees.
pub type Point = (f64, f64);

/// `{"lon", "lat"}` at `field`: both numbers within range, nothing else.
fn parse_point(value: &Value, field: &str) -> Result<Point, GeoError> {
    let object = value
        .as_object()
        .ok_or_else(|| error(field, "must be an object with lon and lat"))?;
    if let Some(other) = object.keys().find(|key| *key != "lon" && *key != "lat") {
        return Err(error(
            format!("{field}.{other}"),
            "unknown field of a geo point",
        ));
    }
    let number = |name: &str, limit: f64| -> Result<f64, GeoError> {
        let path = format!("{field}.{name}");
        let value = object
            .get(name)
            .ok_or_else(|| error(&path, "is required"))?
            .as_f64()
            .ok_or_else(|| error(&path, "must be a number"))?;
        if !(-limit..=limit).contains(&value) {
            return Err(error(&path, format!("must be within -{limit}..={limit}")));
        }
        Ok(value)
    };
    Ok((number("lon", 180.0)?, number("lat", 90.0)?))
}

/// The point a payload value holds: an object with numeric `lat` and `lon`.
pub(crate) fn payload_point(value: &Value) -> Option<Point> {
    Some((value.get("lon")?.as_f64()?, value.get("lat")?.as_f64()?))
}

/// The fields of `object`, refusing any not in `allowed`.
fn fields<'a>(
    value: &'a Value,
    allowed: &[&str],
    what: &str,
) -> Result<&'a serde_json::Map<String, Value>, GeoError> {
    let object = value
        .as_object()
        .ok_or_else(|| error("", format!("must be an object with {what}")))?;
    if let Some(other) = object.keys().find(|key| !allowed.contains(&key.as_str())) {
        return Err(error(
            other.clone(),
            format!("unknown field; expected {what}"),
        ));
    }
    Ok(object)
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BoundingBox {
    top_left: Point,
    bottom_right: Point,
}

impl BoundingBox {
    pub(crate) fn parse(value: &Value) -> Result<BoundingBox, GeoError> {
        let object = fields(
            value,
            &["top_left", "bottom_right"],
            "top_left and bottom_right",
        )?;
        let corner = |name: &str| {
            let corner = object.get(name).ok_or_else(|| error(name, "is required"))?;
            parse_point(corner, name)
        };
        Ok(BoundingBox {
            top_left: corner("top_left")?,
            bottom_right: corner("bottom_right")?,
        })
    }

    /// Strictly inside; a box whose left edge is east of its right one crosses the
    /// antimeridian.
    pub fn contains(&self, (lon, lat): Point) -> bool {
        let (left, top) = self.top_left;
        let (right, bottom) = self.bottom_right;
        let longitude = if left > right {
            lon > left || lon < right
        } else {
            left < lon && lon < right
        };
        longitude && bottom < lat && lat < top
    }
}

impl BoundingBox {
    /// The latitudes the box spans (south, north).
    pub(crate) fn latitudes(&self) -> (f64, f64) {
        (self.bottom_right.1, self.top_left.1)
    }
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Polygon {
    exterior: Vec<Point>,
    interiors: Vec<Vec<Point>>,
}

impl Polygon {
    /// The latitudes the exterior ring spans (south, north).
    pub(crate) fn latitudes(&self) -> (f64, f64) {
        self.exterior.iter().fold(
            (f64::INFINITY, f64::NEG_INFINITY),
            |(south, north), (_, lat)| (south.min(*lat), north.max(*lat)),
        )
    }
}

/// A closed ring: at least 4 points, the last equal to the first (Qdrant's rule).
fn parse_ring(value: &Value, field: &str) -> Result<Vec<Point>, GeoError> {
    let object = value
        .as_object()
        .filter(|object| object.keys().all(|key| key == "points"))
        .ok_or_else(|| error(field, "must be an object with points"))?;
    let points = object
        .get("points")
        .and_then(Value::as_array)
        .ok_or_else(|| error(format!("{field}.points"), "must be a list of geo points"))?;
    let ring = points
        .iter()
        .enumerate()
        .map(|(i, point)| parse_point(point, &format!("{field}.points[{i}]")))
        .collect::<Result<Vec<Point>, GeoError>>()?;
    if ring.len() < 4 {
        return Err(error(
            format!("{field}.points"),
            format!(
                "polygon invalid, the size must be at least 4, got {}",
                ring.len()
            ),
        ));
    }
    let (first, last) = (ring[0], ring[ring.len() - 1]);
    if (first.0 - last.0).abs() > f64::EPSILON || (first.1 - last.1).abs() > f64::EPSILON {
        return Err(error(
            format!("{field}.points"),
            "polygon invalid, the first and the last points should be the same to form a \
             closed line",
        ));
    }
    Ok(ring)
}

/// Where a point lies against a ring.
#[derive(PartialEq)]
enum Side {
    Inside,
    Outside,
    Edge,
}

/// Ray casting to the east, with points on an edge told apart.
fn side(ring: &[Point], (x, y): Point) -> Side {
    let mut inside = false;
    for edge in ring.windows(2) {
        let ((x1, y1), (x2, y2)) = (edge[0], edge[1]);
        let cross = (x2 - x1) * (y - y1) - (y2 - y1) * (x - x1);
        let between = (x1 - x) * (x2 - x) <= 0.0 && (y1 - y) * (y2 - y) <= 0.0;
        if cross == 0.0 && between {
            return Side::Edge;
        }
        if (y1 > y) != (y2 > y) && x < (x2 - x1) * (y - y1) / (y2 - y1) + x1 {
            inside = !inside;
        }
    }
    if inside {
        Side::Inside
    } else {
        Side::Outside
    }
}

impl Polygon {
    pub(crate) fn parse(value: &Value) -> Result<Polygon, GeoError> {
        let object = fields(value, &["exterior", "interiors"], "exterior and interiors")?;
        let exterior = object
            .get("exterior")
            .ok_or_else(|| error("exterior", "is required"))?;
        let exterior = parse_ring(exterior, "exterior")?;
        let interiors = match object.get("interiors") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(rings)) => rings
                .iter()
                .enumerate()
                .map(|(i, ring)| parse_ring(ring, &format!("interiors[{i}]")))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(error("interiors", "must be a list of rings")),
        };
        Ok(Polygon {
            exterior,
            interiors,
        })
    }

    /// Strictly inside the exterior and outside (not on) every interior ring.
    pub fn contains(&self, point: Point) -> bool {
        side(&self.exterior, point) == Side::Inside
            && self
                .interiors
                .iter()
                .all(|ring| side(ring, point) == Side::Outside)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{BoundingBox, Polygon};

    #[test]
    fn boxes_are_strict_and_cross_the_antimeridian() {
        let corners = |left: f64, right: f64| {
            BoundingBox::parse(&json!({"top_left": {"lon": left, "lat": 10.0},
                                       "bottom_right": {"lon": right, "lat": 0.0}}))
            .unwrap()
        };
        let plain = corners(0.0, 10.0);
        assert!(plain.contains((5.0, 5.0)));
        assert!(!plain.contains((10.0, 5.0)) && !plain.contains((5.0, 0.0)));
        let wrapped = corners(170.0, -170.0);
        assert!(wrapped.contains((175.0, 5.0)) && wrapped.contains((-175.0, 5.0)));
        assert!(!wrapped.contains((0.0, 5.0)));
        for bad in [
            json!({"top_left": {"lon": 0, "lat": 91}, "bottom_right": {"lon": 1, "lat": 0}}),
            json!({"top_left": {"lon": 0, "lat": 1}}),
            json!({"top_left": {"lon": 0, "lat": 1}, "bottom_right": {"lon": 1, "lat": 0},
                   "extra": 1}),
        ] {
            assert!(BoundingBox::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn polygons_exclude_edges_and_holes() {
        let ring = |points: &[(f64, f64)]| {
            json!({"points": points.iter().map(|(lon, lat)| json!({"lon": lon, "lat": lat}))
                                           .collect::<Vec<_>>()})
        };
        let square = ring(&[
            (0.0, 0.0),
            (10.0, 0.0),
            (10.0, 10.0),
            (0.0, 10.0),
            (0.0, 0.0),
        ]);
        let hole = ring(&[(4.0, 4.0), (6.0, 4.0), (6.0, 6.0), (4.0, 6.0), (4.0, 4.0)]);
        let polygon = Polygon::parse(&json!({"exterior": square, "interiors": [hole]})).unwrap();
        assert!(polygon.contains((2.0, 2.0)));
        assert!(!polygon.contains((5.0, 5.0)), "in the hole");
        assert!(!polygon.contains((4.0, 5.0)), "on the hole's edge");
        assert!(!polygon.contains((0.0, 5.0)), "on the exterior's edge");
        assert!(!polygon.contains((11.0, 5.0)));
        let open = ring(&[(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (0.0, 10.0)]);
        let error = Polygon::parse(&json!({"exterior": open})).unwrap_err();
        assert!(
            error.reason.contains("first and the last"),
            "{}",
            error.reason
        );
        let short = ring(&[(0.0, 0.0), (1.0, 0.0), (0.0, 0.0)]);
        let error = Polygon::parse(&json!({"exterior": short})).unwrap_err();
        assert!(error.reason.contains("at least 4"), "{}", error.reason);
    }
}

//! Sweeps on the wire: a grid of spec values over a base spec, the grid
//! point each of its jobs prices, and the batch summary grouped by point.
//!
//! A sweep is a JSON object whose members name spec fields and list the
//! values each takes, `{"exercise": [25, 30, 35], "periods": [10, 20]}`.
//! Its jobs are the cartesian product in the order of the members, the
//! last member varying fastest (as nested loops written in that order),
//! each grid point repeated `repeat` times in a row. So job `p` of the
//! batch prices point `p / repeat`, and the point follows from the
//! position alone: nothing per job needs storing.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::StateCounts;

/// A grid of spec values: each axis a spec field and the values it takes,
/// in the order the request gave them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sweep {
    /// The axes, outermost first.
    pub axes: Vec<Axis>,
}

/// One axis of a sweep: a spec field and its values.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// The spec field, e.g. `exercise`.
    pub field: String,
    /// The values it takes, as JSON (numbers, or names such as `"put"`).
    pub values: Vec<Value>,
}

impl Sweep {
    /// Number of grid points (the product of the axes' lengths), or `None`
    /// when it does not fit a `u64`. Computed without expanding anything.
    pub fn points(&self) -> Option<u64> {
        self.axes.iter().try_fold(1u64, |n, axis| {
            n.checked_mul(u64::try_from(axis.values.len()).ok()?)
        })
    }

    /// The `index`th grid point (the last axis varying fastest), with the
    /// index of each axis's value.
    pub fn point(&self, index: u64) -> Vec<usize> {
        let mut rest = index;
        let mut picks = vec![0; self.axes.len()];
        for (pick, axis) in picks.iter_mut().zip(&self.axes).rev() {
            let len = axis.values.len().max(1) as u64;
            // The remainder is below an axis length, which is a usize.
            *pick = usize::try_from(rest % len).unwrap_or(0);
            rest /= len;
        }
        picks
    }

    /// The `index`th grid point as field values.
    pub fn grid_point(&self, index: u64) -> GridPoint {
        GridPoint(
            self.axes
                .iter()
                .zip(self.point(index))
                .map(|(axis, pick)| {
                    let value = axis.values.get(pick).cloned().unwrap_or(Value::Null);
                    (axis.field.clone(), value)
                })
                .collect(),
        )
    }

    /// The axes' field names, outermost first.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.axes.iter().map(|axis| axis.field.as_str())
    }
}

impl Serialize for Sweep {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.axes.len()))?;
        for axis in &self.axes {
            map.serialize_entry(&axis.field, &axis.values)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Sweep {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Axes;
        impl<'de> Visitor<'de> for Axes {
            type Value = Sweep;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object mapping spec fields to arrays of values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Sweep, A::Error> {
                let mut axes: Vec<Axis> = Vec::new();
                while let Some(field) = map.next_key::<String>()? {
                    if axes.iter().any(|axis| axis.field == field) {
                        return Err(serde::de::Error::custom(format!(
                            "sweep names {field} twice"
                        )));
                    }
                    let values = map.next_value::<Vec<Value>>()?;
                    axes.push(Axis { field, values });
                }
                Ok(Sweep { axes })
            }
        }
        deserializer.deserialize_map(Axes)
    }
}

/// The spec values of one grid point, in the sweep's axis order; a JSON
/// object on the wire (`{"exercise": 25, "periods": 10}`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GridPoint(pub Vec<(String, Value)>);

impl Serialize for GridPoint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (field, value) in &self.0 {
            map.serialize_entry(field, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for GridPoint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = GridPoint;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of spec field values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GridPoint, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    fields.push(entry);
                }
                Ok(GridPoint(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl fmt::Display for GridPoint {
    /// `exercise=25, periods=10`; strings without their quotes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (field, value)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            match value {
                Value::String(text) => write!(f, "{sep}{field}={text}")?,
                other => write!(f, "{sep}{field}={other}")?,
            }
        }
        Ok(())
    }
}

/// A sweep as a batch stores it: the grid and how many jobs price each point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchGrid {
    /// The grid.
    pub sweep: Sweep,
    /// Jobs per grid point, one after the other.
    pub repeat: u32,
}

impl BatchGrid {
    /// The grid point of the batch's job at `position`.
    pub fn point_at(&self, position: u64) -> GridPoint {
        self.sweep
            .grid_point(position / u64::from(self.repeat.max(1)))
    }
}

/// Prices of one grid point's succeeded jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PointPrice {
    /// Succeeded jobs.
    pub count: u64,
    /// Mean of their prices.
    pub mean: f64,
    /// Standard error of `mean` from the jobs' own standard errors:
    /// sqrt(Σ std_error²) / count (0 for exact prices).
    pub std_error: f64,
    /// 95% confidence interval of `mean`, `mean ± 1.96 · std_error`.
    pub ci95: [f64; 2],
    /// Sample standard deviation of the prices (n − 1); `None` below two jobs.
    pub stddev: Option<f64>,
    /// Smallest price.
    pub min: f64,
    /// Largest price.
    pub max: f64,
    /// Paths simulated over these jobs.
    pub paths: u64,
}

/// One grid point of a batch summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PointSummary {
    /// The point's spec values (empty for a batch without a sweep).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub point: GridPoint,
    /// Its jobs per state.
    pub counts: StateCounts,
    /// Over its succeeded jobs; `None` while none succeeded.
    pub price: Option<PointPrice>,
}

/// A batch's jobs grouped by grid point (`GET /v1/batches/{id}/summary`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchSummary {
    /// The batch.
    pub id: uuid::Uuid,
    /// True when no job is queued or running.
    pub done: bool,
    /// The batch's sweep, if it was submitted as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub sweep: Option<Sweep>,
    /// One entry per grid point in grid order; a batch without a sweep is
    /// one point with no fields.
    pub points: Vec<PointSummary>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_keeps_its_order_and_counts_its_points() {
        let json = r#"{"periods": [10, 20], "exercise": [25, 30, 35]}"#;
        let sweep: Sweep = serde_json::from_str(json).unwrap();
        assert_eq!(sweep.fields().collect::<Vec<_>>(), ["periods", "exercise"]);
        assert_eq!(sweep.points(), Some(6));
        assert_eq!(
            serde_json::to_string(&sweep).unwrap(),
            r#"{"periods":[10,20],"exercise":[25,30,35]}"#
        );
        // The last axis varies fastest.
        assert_eq!(sweep.grid_point(0).to_string(), "periods=10, exercise=25");
        assert_eq!(sweep.grid_point(2).to_string(), "periods=10, exercise=35");
        assert_eq!(sweep.grid_point(3).to_string(), "periods=20, exercise=25");
        assert_eq!(sweep.grid_point(5).to_string(), "periods=20, exercise=35");
    }

    #[test]
    fn a_field_named_twice_is_refused() {
        let err = serde_json::from_str::<Sweep>(r#"{"up": [1.2], "up": [1.3]}"#).unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
    }

    #[test]
    fn a_huge_grid_is_counted_without_overflow() {
        let axis = |n| Axis {
            field: "x".into(),
            values: vec![Value::Null; n],
        };
        let sweep = Sweep {
            axes: (0..40).map(|_| axis(1 << 10)).collect(),
        };
        assert_eq!(sweep.points(), None);
        assert_eq!(Sweep::default().points(), Some(1));
    }

    #[test]
    fn repeated_points_follow_one_another() {
        let grid = BatchGrid {
            sweep: serde_json::from_str(r#"{"option": ["call", "put"]}"#).unwrap(),
            repeat: 3,
        };
        let points: Vec<String> = (0..6).map(|p| grid.point_at(p).to_string()).collect();
        assert_eq!(
            points,
            [
                "option=call",
                "option=call",
                "option=call",
                "option=put",
                "option=put",
                "option=put"
            ]
        );
        let back: BatchGrid = serde_json::from_str(&serde_json::to_string(&grid).unwrap()).unwrap();
        assert_eq!(back, grid);
    }
}

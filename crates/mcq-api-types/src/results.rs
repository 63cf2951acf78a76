//! A batch's results as a table on the wire: one row per job, the columns
//! chosen by the request (`GET /v1/batches/{id}/results`).

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use uuid::Uuid;

/// One page of a batch's results table (the JSON format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResultsPage {
    /// The column names, in the order of each row's members.
    pub columns: Vec<String>,
    /// One row per job, in submission order.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub rows: Vec<ResultRow>,
    /// Cursor for the next page (`?after=`); absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}

/// One row: column names and values in column order; a JSON object on the
/// wire, `null` where a job has no value (a price before it succeeded).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResultRow(pub Vec<(String, Value)>);

impl ResultRow {
    /// The value of column `name`, if the row has that column.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

impl Serialize for ResultRow {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ResultRow {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Cells;
        impl<'de> Visitor<'de> for Cells {
            type Value = ResultRow;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of column values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ResultRow, A::Error> {
                let mut cells = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    cells.push(entry);
                }
                Ok(ResultRow(cells))
            }
        }
        deserializer.deserialize_map(Cells)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_keeps_its_column_order() {
        let row = ResultRow(vec![
            ("price".into(), Value::from(9.5)),
            ("exercise".into(), Value::from(25)),
            ("error".into(), Value::Null),
        ]);
        let json = serde_json::to_string(&row).unwrap();
        assert_eq!(json, r#"{"price":9.5,"exercise":25,"error":null}"#);
        let back: ResultRow = serde_json::from_str(&json).unwrap();
        assert_eq!(back, row);
        assert_eq!(back.get("exercise"), Some(&Value::from(25)));
        assert_eq!(back.get("seed"), None);
    }
}

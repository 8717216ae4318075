//! Cursor-based pagination of the list methods.

use serde::{Deserialize, Serialize};

use super::Meta;

/// An opaque pagination position, issued by the server in `nextCursor`.
pub type Cursor = String;

/// Parameters of a paginated list request (`tools/list`, `resources/list`, …).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaginatedParams {
    /// Where to continue: the `nextCursor` of the previous page. Absent for the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl PaginatedParams {
    /// Parameters for the first page.
    pub fn first_page() -> Self {
        Self::default()
    }

    /// Parameters for the page after `cursor`.
    pub fn after(cursor: impl Into<Cursor>) -> Self {
        Self {
            cursor: Some(cursor.into()),
            meta: None,
        }
    }
}

impl_has_meta!(PaginatedParams);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cursor_round_trip() {
        assert_eq!(
            serde_json::to_value(PaginatedParams::first_page()).expect("ser"),
            json!({})
        );
        let p = PaginatedParams::after("page-2");
        let v = serde_json::to_value(&p).expect("ser");
        assert_eq!(v, json!({"cursor": "page-2"}));
        assert_eq!(serde_json::from_value::<PaginatedParams>(v).expect("de"), p);
    }
}

//! The forms of form-mode elicitation: a flat object schema whose fields are restricted,
//! primitive JSON Schemas (strings, numbers, booleans, single- and multi-select enums).

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::JsonObject;
use super::macros::Tagged;

open_string_enum! {
    /// A format a string field may require.
    pub enum StringFormat {
        /// An e-mail address.
        Email = "email",
        /// A URI.
        Uri = "uri",
        /// A calendar date.
        Date = "date",
        /// A date and time.
        DateTime = "date-time",
    }
}

/// A free-text field (`"type": "string"`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringSchema {
    /// The field's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The shortest allowed length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u32>,
    /// The longest allowed length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u32>,
    /// A required format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<StringFormat>,
    /// The initial value (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// Whether a numeric field takes any number or integers only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NumberKind {
    /// Any number.
    #[default]
    Number,
    /// Integers only.
    Integer,
}

/// A numeric field (`"type": "number"` or `"integer"`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NumberSchema {
    /// Number or integer.
    #[serde(rename = "type")]
    pub kind: NumberKind,
    /// The field's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The smallest allowed value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<f64>,
    /// The largest allowed value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<f64>,
    /// The initial value (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<f64>,
}

/// A yes/no field (`"type": "boolean"`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BooleanSchema {
    /// The field's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The initial value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
}

/// One choice of a titled enum: a value and its label.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnumOption {
    /// The value sent back.
    #[serde(rename = "const")]
    pub value: String,
    /// The label shown.
    pub title: String,
}

impl EnumOption {
    /// A choice with a value and a label.
    pub fn new(value: impl Into<String>, title: impl Into<String>) -> Self {
        Self {
            value: value.into(),
            title: title.into(),
        }
    }
}

/// A single choice among plain values (`"type": "string"` with `enum`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UntitledSingleSelectEnumSchema {
    /// The field's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The allowed values.
    #[serde(rename = "enum")]
    pub values: Vec<String>,
    /// The initial value (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// A single choice among labelled values (`"type": "string"` with `oneOf`, 2025-11-25).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledSingleSelectEnumSchema {
    /// The field's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The choices.
    pub one_of: Vec<EnumOption>,
    /// The initial value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// The 2025-06-18 way of labelling an enum: `enum` plus a parallel `enumNames` (still accepted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyTitledEnumSchema {
    /// The field's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The allowed values.
    #[serde(rename = "enum")]
    pub values: Vec<String>,
    /// Labels, one per value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enum_names: Vec<String>,
    /// The initial value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// The `items` of a multi-select among plain values: `{"type": "string", "enum": [..]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct UntitledEnumItems {
    /// The allowed values.
    #[serde(rename = "enum")]
    pub values: Vec<String>,
}

impl Serialize for UntitledEnumItems {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("type", "string")?;
        map.serialize_entry("enum", &self.values)?;
        map.end()
    }
}

/// The `items` of a multi-select among labelled values: `{"anyOf": [..]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledEnumItems {
    /// The choices.
    pub any_of: Vec<EnumOption>,
}

/// Several choices among plain values (`"type": "array"`, 2025-11-25).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UntitledMultiSelectEnumSchema {
    /// The field's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The fewest choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u32>,
    /// The most choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u32>,
    /// The allowed values.
    pub items: UntitledEnumItems,
    /// The values chosen initially.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default: Vec<String>,
}

/// Several choices among labelled values (`"type": "array"`, 2025-11-25).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledMultiSelectEnumSchema {
    /// The field's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The fewest choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u32>,
    /// The most choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u32>,
    /// The choices.
    pub items: TitledEnumItems,
    /// The values chosen initially.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default: Vec<String>,
}

/// One field of an elicitation form: the restricted, flat JSON Schemas the specification allows.
#[derive(Debug, Clone, PartialEq)]
pub enum PrimitiveSchema {
    /// Free text.
    String(StringSchema),
    /// A number or an integer.
    Number(NumberSchema),
    /// Yes or no.
    Boolean(BooleanSchema),
    /// One of plain values.
    SingleSelect(UntitledSingleSelectEnumSchema),
    /// One of labelled values (2025-11-25).
    TitledSingleSelect(TitledSingleSelectEnumSchema),
    /// Several of plain values (2025-11-25).
    MultiSelect(UntitledMultiSelectEnumSchema),
    /// Several of labelled values (2025-11-25).
    TitledMultiSelect(TitledMultiSelectEnumSchema),
    /// One of values labelled with `enumNames` (the 2025-06-18 form).
    LegacyTitledEnum(LegacyTitledEnumSchema),
}

impl PrimitiveSchema {
    /// A free-text field.
    pub fn string() -> Self {
        Self::String(StringSchema::default())
    }

    /// A numeric field.
    pub fn number() -> Self {
        Self::Number(NumberSchema::default())
    }

    /// An integer field.
    pub fn integer() -> Self {
        Self::Number(NumberSchema {
            kind: NumberKind::Integer,
            ..NumberSchema::default()
        })
    }

    /// A yes/no field.
    pub fn boolean() -> Self {
        Self::Boolean(BooleanSchema::default())
    }

    /// A single choice among `values`.
    pub fn single_select<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::SingleSelect(UntitledSingleSelectEnumSchema {
            values: values.into_iter().map(Into::into).collect(),
            ..Default::default()
        })
    }

    /// A single choice among labelled values.
    pub fn titled_single_select(options: impl IntoIterator<Item = EnumOption>) -> Self {
        Self::TitledSingleSelect(TitledSingleSelectEnumSchema {
            one_of: options.into_iter().collect(),
            ..Default::default()
        })
    }

    /// Several choices among `values`.
    pub fn multi_select<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::MultiSelect(UntitledMultiSelectEnumSchema {
            items: UntitledEnumItems {
                values: values.into_iter().map(Into::into).collect(),
            },
            ..Default::default()
        })
    }

    /// Several choices among labelled values.
    pub fn titled_multi_select(options: impl IntoIterator<Item = EnumOption>) -> Self {
        Self::TitledMultiSelect(TitledMultiSelectEnumSchema {
            items: TitledEnumItems {
                any_of: options.into_iter().collect(),
            },
            ..Default::default()
        })
    }

    fn title_and_description(&mut self) -> (&mut Option<String>, &mut Option<String>) {
        match self {
            Self::String(s) => (&mut s.title, &mut s.description),
            Self::Number(s) => (&mut s.title, &mut s.description),
            Self::Boolean(s) => (&mut s.title, &mut s.description),
            Self::SingleSelect(s) => (&mut s.title, &mut s.description),
            Self::TitledSingleSelect(s) => (&mut s.title, &mut s.description),
            Self::MultiSelect(s) => (&mut s.title, &mut s.description),
            Self::TitledMultiSelect(s) => (&mut s.title, &mut s.description),
            Self::LegacyTitledEnum(s) => (&mut s.title, &mut s.description),
        }
    }

    /// Sets the field's label.
    #[must_use]
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        *self.title_and_description().0 = Some(title.into());
        self
    }

    /// Sets the field's help text.
    #[must_use]
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        *self.title_and_description().1 = Some(description.into());
        self
    }

    /// True for the kinds 2025-06-18 does not know (multi-selects), which must not be sent to
    /// a peer that negotiated an older revision.
    pub fn needs_2025_11_25(&self) -> bool {
        matches!(self, Self::MultiSelect(_) | Self::TitledMultiSelect(_))
    }
}

impl Serialize for PrimitiveSchema {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::String(inner) => Tagged {
                kind: "string",
                inner,
            }
            .serialize(serializer),
            Self::Number(inner) => inner.serialize(serializer),
            Self::Boolean(inner) => Tagged {
                kind: "boolean",
                inner,
            }
            .serialize(serializer),
            Self::SingleSelect(inner) => Tagged {
                kind: "string",
                inner,
            }
            .serialize(serializer),
            Self::TitledSingleSelect(inner) => Tagged {
                kind: "string",
                inner,
            }
            .serialize(serializer),
            Self::LegacyTitledEnum(inner) => Tagged {
                kind: "string",
                inner,
            }
            .serialize(serializer),
            Self::MultiSelect(inner) => Tagged {
                kind: "array",
                inner,
            }
            .serialize(serializer),
            Self::TitledMultiSelect(inner) => Tagged {
                kind: "array",
                inner,
            }
            .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for PrimitiveSchema {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        fn decode<T: serde::de::DeserializeOwned, E: serde::de::Error>(
            map: JsonObject,
            what: &str,
        ) -> Result<T, E> {
            serde_json::from_value(Value::Object(map))
                .map_err(|e| E::custom(format_args!("invalid {what} field schema: {e}")))
        }
        let map = JsonObject::deserialize(deserializer)?;
        let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "string" if map.contains_key("oneOf") => {
                decode(map, "titled single-select").map(Self::TitledSingleSelect)
            }
            "string" if map.contains_key("enum") && map.contains_key("enumNames") => {
                decode(map, "titled enum").map(Self::LegacyTitledEnum)
            }
            "string" if map.contains_key("enum") => {
                decode(map, "single-select").map(Self::SingleSelect)
            }
            "string" => decode(map, "string").map(Self::String),
            "number" | "integer" => decode(map, "number").map(Self::Number),
            "boolean" => decode(map, "boolean").map(Self::Boolean),
            "array" => {
                let titled = map
                    .get("items")
                    .is_some_and(|items| items.get("anyOf").is_some());
                if titled {
                    decode(map, "titled multi-select").map(Self::TitledMultiSelect)
                } else {
                    decode(map, "multi-select").map(Self::MultiSelect)
                }
            }
            other => Err(D::Error::custom(format_args!(
                "unsupported elicitation field type {other:?} (expected string, number, integer, boolean or array)"
            ))),
        }
    }
}

/// The form of an elicitation: a flat object schema whose properties are primitive fields.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ElicitationSchema {
    /// The JSON Schema dialect, if stated (2025-11-25).
    #[serde(rename = "$schema", default)]
    pub schema: Option<String>,
    /// The fields, by name.
    pub properties: BTreeMap<String, PrimitiveSchema>,
    /// The names of the fields that must be filled.
    #[serde(default)]
    pub required: Vec<String>,
}

impl ElicitationSchema {
    /// An empty form.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a field.
    #[must_use]
    pub fn property(
        mut self,
        name: impl Into<String>,
        schema: PrimitiveSchema,
        required: bool,
    ) -> Self {
        let name = name.into();
        if required {
            self.required.push(name.clone());
        }
        self.properties.insert(name, schema);
        self
    }
}

impl Serialize for ElicitationSchema {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(schema) = &self.schema {
            map.serialize_entry("$schema", schema)?;
        }
        map.serialize_entry("type", "object")?;
        map.serialize_entry("properties", &self.properties)?;
        if !self.required.is_empty() {
            map.serialize_entry("required", &self.required)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn form() -> ElicitationSchema {
        ElicitationSchema::new()
            .property("name", PrimitiveSchema::string().with_title("Name"), true)
            .property(
                "email",
                PrimitiveSchema::String(StringSchema {
                    format: Some(StringFormat::Email),
                    default: Some("a@b.c".into()),
                    ..Default::default()
                }),
                false,
            )
            .property("age", PrimitiveSchema::integer(), false)
            .property("subscribe", PrimitiveSchema::boolean(), false)
            .property("size", PrimitiveSchema::single_select(["s", "m"]), false)
            .property(
                "color",
                PrimitiveSchema::titled_single_select([EnumOption::new("r", "Red")]),
                false,
            )
            .property("tags", PrimitiveSchema::multi_select(["a", "b"]), false)
            .property(
                "pets",
                PrimitiveSchema::titled_multi_select([EnumOption::new("c", "Cat")]),
                false,
            )
            .property(
                "legacy",
                PrimitiveSchema::LegacyTitledEnum(LegacyTitledEnumSchema {
                    values: vec!["x".into()],
                    enum_names: vec!["Ex".into()],
                    ..Default::default()
                }),
                false,
            )
    }

    #[test]
    fn form_round_trip() {
        let schema = form();
        let v = serde_json::to_value(&schema).expect("ser");
        assert_eq!(v["type"], json!("object"));
        assert_eq!(v["required"], json!(["name"]));
        let props = &v["properties"];
        assert_eq!(props["name"], json!({"type": "string", "title": "Name"}));
        assert_eq!(props["age"], json!({"type": "integer"}));
        assert_eq!(props["size"], json!({"type": "string", "enum": ["s", "m"]}));
        assert_eq!(
            props["color"],
            json!({"type": "string", "oneOf": [{"const": "r", "title": "Red"}]})
        );
        assert_eq!(
            props["tags"],
            json!({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}})
        );
        assert_eq!(
            props["pets"],
            json!({"type": "array", "items": {"anyOf": [{"const": "c", "title": "Cat"}]}})
        );
        assert_eq!(
            props["legacy"],
            json!({"type": "string", "enum": ["x"], "enumNames": ["Ex"]})
        );
        let back: ElicitationSchema = serde_json::from_value(v).expect("de");
        assert_eq!(back, schema);
    }
}

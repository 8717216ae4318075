//! Small private macros shared by the schema modules.

/// Declares a string enum whose unknown values are kept in an `Other(String)` variant, so a value
/// added by a newer revision never makes a whole message fail to decode.
macro_rules! open_string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this version of tidewire does not know, kept verbatim.
            Other(String),
        }

        impl $name {
            /// The value as it appears on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $value, )+
                    Self::Other(s) => s,
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $value => Self::$variant, )+
                    other => Self::Other(other.to_owned()),
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match s.as_str() {
                    $( $value => Self::$variant, )+
                    _ => Self::Other(s),
                }
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct V;
                impl ::serde::de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str("a string")
                    }
                    fn visit_str<E: ::serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        Ok($name::from(v))
                    }
                    fn visit_string<E: ::serde::de::Error>(self, v: String) -> Result<$name, E> {
                        Ok($name::from(v))
                    }
                }
                deserializer.deserialize_str(V)
            }
        }
    };
}

/// Declares an enum of blocks tagged by their `type` member, with an `Unknown(Value)` fallback
/// for tags this version does not know. Serialisation writes the tag first and then the fields
/// of the block; deserialisation reads the object once, looks at `type` and decodes the matching
/// struct from it.
macro_rules! tagged_block_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident($ty:ty) = $tag:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $( $(#[$vmeta])* $variant($ty), )+
            /// A block whose `type` this version of tidewire does not know, kept as received so
            /// that it survives a round trip.
            Unknown(::serde_json::Value),
        }

        impl $name {
            /// The `type` tag of the block (for `Unknown`, the tag it carried, if any).
            pub fn type_tag(&self) -> Option<&str> {
                match self {
                    $( Self::$variant(_) => Some($tag), )+
                    Self::Unknown(v) => v.get("type").and_then(::serde_json::Value::as_str),
                }
            }
        }

        $(
            impl From<$ty> for $name {
                fn from(block: $ty) -> Self {
                    Self::$variant(block)
                }
            }
        )+

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( Self::$variant(inner) => {
                        ::serde::Serialize::serialize(
                            &$crate::schema::macros::Tagged { kind: $tag, inner },
                            serializer,
                        )
                    } )+
                    Self::Unknown(value) => ::serde::Serialize::serialize(value, serializer),
                }
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                use ::serde::de::Error as _;
                type Decode = fn(::serde_json::Value) -> Result<$name, ::serde_json::Error>;
                let map = <$crate::schema::JsonObject as ::serde::Deserialize>::deserialize(deserializer)?;
                let (tag, decode): (&'static str, Decode) =
                    match map.get("type").and_then(::serde_json::Value::as_str) {
                        $( Some($tag) => ($tag, |v| ::serde_json::from_value(v).map($name::$variant)), )+
                        Some(_) => return Ok(Self::Unknown(::serde_json::Value::Object(map))),
                        None => {
                            return Err(D::Error::custom(concat!(
                                "a ", stringify!($name), " needs a string `type` member"
                            )))
                        }
                    };
                decode(::serde_json::Value::Object(map))
                    .map_err(|e| D::Error::custom(format_args!("invalid `{tag}` block: {e}")))
            }
        }
    };
}

/// Implements [`HasMeta`](crate::schema::HasMeta) for types with a `meta: Option<Meta>` field.
macro_rules! impl_has_meta {
    ($($ty:ty),+ $(,)?) => {
        $(
            impl $crate::schema::HasMeta for $ty {
                fn meta(&self) -> Option<&$crate::schema::Meta> {
                    self.meta.as_ref()
                }
                fn meta_mut(&mut self) -> &mut Option<$crate::schema::Meta> {
                    &mut self.meta
                }
            }
        )+
    };
}

/// Declares a method marker type implementing [`RequestType`](crate::schema::RequestType); a
/// fifth argument names the function that reads its params out of their parsed tree
/// ([`RequestType::params_from_value`](crate::schema::RequestType::params_from_value)).
macro_rules! request_marker {
    ($(#[$meta:meta])* $name:ident, $method:literal, $params:ty, $result:ty) => {
        request_marker!(@marker $(#[$meta])* $name, $method, $params, $result, {});
    };
    ($(#[$meta:meta])* $name:ident, $method:literal, $params:ty, $result:ty, $from_value:path) => {
        request_marker!(@marker $(#[$meta])* $name, $method, $params, $result, {
            fn params_from_value(
                params: serde_json::Value,
            ) -> Result<Self::Params, serde_json::Error> {
                $from_value(params)
            }
        });
    };
    (@marker $(#[$meta:meta])* $name:ident, $method:literal, $params:ty, $result:ty, { $($read:tt)* }) => {
        $(#[$meta])*
        #[doc = ""]
        #[doc = concat!("Method `", $method, "`: params [`", stringify!($params), "`], result [`", stringify!($result), "`].")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl $crate::schema::RequestType for $name {
            const METHOD: &'static str = $method;
            type Params = $params;
            type Result = $result;
            $($read)*
        }
    };
}

/// Declares a method marker type implementing
/// [`NotificationType`](crate::schema::NotificationType).
macro_rules! notification_marker {
    ($(#[$meta:meta])* $name:ident, $method:literal, $params:ty) => {
        $(#[$meta])*
        #[doc = ""]
        #[doc = concat!("Method `", $method, "`: params [`", stringify!($params), "`].")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl $crate::schema::NotificationType for $name {
            const METHOD: &'static str = $method;
            type Params = $params;
        }
    };
}

/// Serialises `inner` (a struct) with a leading `type` member.
#[derive(serde::Serialize)]
pub(crate) struct Tagged<'a, T: serde::Serialize> {
    #[serde(rename = "type")]
    pub(crate) kind: &'a str,
    #[serde(flatten)]
    pub(crate) inner: &'a T,
}

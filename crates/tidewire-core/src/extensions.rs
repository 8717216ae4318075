//! [`Extensions`]: values keyed by their Rust type, which a transport attaches to a message and
//! a handler reads back (who the request acts for, the HTTP request that carried it, what the
//! stream can carry).
//!
//! The same idea as `http::Extensions`, without the `http` crate, so a build with no HTTP
//! transport (stdio alone) compiles none of it. A message carries a handful of entries, so they
//! live in a short list searched in order, not a hash map: no table to allocate, and dropping an
//! empty set costs nothing.

use std::any::{Any, TypeId};
use std::fmt;

/// A set of values, at most one per Rust type.
///
/// ```
/// use tidewire_core::Extensions;
///
/// #[derive(Clone, Debug, PartialEq)]
/// struct Tenant(&'static str);
///
/// let mut extensions = Extensions::new();
/// assert_eq!(extensions.insert(Tenant("acme")), None);
/// assert_eq!(extensions.get::<Tenant>(), Some(&Tenant("acme")));
/// assert_eq!(extensions.insert(Tenant("umbrella")), Some(Tenant("acme")));
/// assert_eq!(extensions.len(), 1);
/// ```
#[derive(Default, Clone)]
pub struct Extensions {
    entries: Vec<Box<dyn Entry>>,
}

impl Extensions {
    /// An empty set (allocates nothing).
    pub const fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// Puts `value` in, and returns the value of its type that was there before.
    pub fn insert<T: Clone + Send + Sync + 'static>(&mut self, value: T) -> Option<T> {
        match self.position::<T>() {
            Some(at) => {
                let old = std::mem::replace(&mut self.entries[at], Box::new(Held(value)));
                old.into_any().downcast::<T>().ok().map(|old| *old)
            }
            None => {
                self.entries.push(Box::new(Held(value)));
                None
            }
        }
    }

    /// The value of type `T`, when there is one.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        let at = self.position::<T>()?;
        self.entries[at].as_any().downcast_ref()
    }

    /// The value of type `T`, mutably, when there is one.
    pub fn get_mut<T: Send + Sync + 'static>(&mut self) -> Option<&mut T> {
        let at = self.position::<T>()?;
        self.entries[at].as_any_mut().downcast_mut()
    }

    /// Takes the value of type `T` out, when there is one.
    pub fn remove<T: Send + Sync + 'static>(&mut self) -> Option<T> {
        let at = self.position::<T>()?;
        let entry = self.entries.swap_remove(at);
        entry.into_any().downcast::<T>().ok().map(|value| *value)
    }

    /// Whether there is a value of type `T`.
    pub fn contains<T: Send + Sync + 'static>(&self) -> bool {
        self.position::<T>().is_some()
    }

    /// Puts every value of `other` in, replacing values of the same type.
    pub fn extend(&mut self, other: Extensions) {
        for entry in other.entries {
            let id = entry.as_any().type_id();
            match self.entries.iter().position(|e| e.as_any().type_id() == id) {
                Some(at) => self.entries[at] = entry,
                None => self.entries.push(entry),
            }
        }
    }

    /// How many values there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Takes every value out.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    fn position<T: 'static>(&self) -> Option<usize> {
        let id = TypeId::of::<T>();
        self.entries
            .iter()
            .position(|entry| entry.as_any().type_id() == id)
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.entries.len())
            .finish_non_exhaustive()
    }
}

/// One value: cloneable, and reachable as `Any` to be downcast (safely) to its type.
trait Entry: Send + Sync + 'static {
    fn clone_box(&self) -> Box<dyn Entry>;
    fn as_any(&self) -> &(dyn Any + Send + Sync);
    fn as_any_mut(&mut self) -> &mut (dyn Any + Send + Sync);
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

/// The one implementation of [`Entry`]. A blanket `impl Entry for T` would also cover
/// `Box<dyn Entry>` itself (it is `Clone`), and a method called on a box would then answer for
/// the box instead of the value in it.
#[derive(Clone)]
struct Held<T>(T);

impl<T: Clone + Send + Sync + 'static> Entry for Held<T> {
    fn clone_box(&self) -> Box<dyn Entry> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &(dyn Any + Send + Sync) {
        &self.0
    }
    fn as_any_mut(&mut self) -> &mut (dyn Any + Send + Sync) {
        &mut self.0
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        Box::new(self.0)
    }
}

impl Clone for Box<dyn Entry> {
    fn clone(&self) -> Self {
        (**self).clone_box()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct A(u32);
    #[derive(Clone, Debug, PartialEq)]
    struct B(String);

    #[test]
    fn one_value_per_type_found_by_its_type() {
        let mut set = Extensions::new();
        assert!(set.is_empty());
        assert_eq!(set.get::<A>(), None);
        set.insert(A(1));
        set.insert(B("b".into()));
        assert_eq!(set.insert(A(2)), Some(A(1)));
        assert_eq!(set.len(), 2);
        assert_eq!(set.get::<A>(), Some(&A(2)));
        assert_eq!(set.get::<B>(), Some(&B("b".into())));
        assert!(!set.contains::<u8>());

        set.get_mut::<A>().expect("present").0 = 3;
        assert_eq!(set.get::<A>(), Some(&A(3)));
        assert_eq!(set.remove::<A>(), Some(A(3)));
        assert_eq!(set.remove::<A>(), None);
        assert_eq!(set.get::<B>(), Some(&B("b".into())));
    }

    #[test]
    fn a_clone_is_deep_and_extend_replaces_by_type() {
        let mut set = Extensions::new();
        set.insert(A(1));
        set.insert(B("one".into()));
        let mut copy = set.clone();
        copy.get_mut::<B>().expect("present").0.push('!');
        assert_eq!(set.get::<B>(), Some(&B("one".into())));
        assert_eq!(copy.get::<B>(), Some(&B("one!".into())));

        let mut other = Extensions::new();
        other.insert(A(9));
        other.insert(7_u8);
        set.extend(other);
        assert_eq!(set.len(), 3);
        assert_eq!(set.get::<A>(), Some(&A(9)));
        assert_eq!(set.get::<u8>(), Some(&7));
        set.clear();
        assert!(set.is_empty());
    }

    #[test]
    fn a_box_holding_a_value_is_its_own_type() {
        // A clone of the set holds clones of the values, found by the values' types (not by
        // the type of the box around them).
        let mut set = Extensions::new();
        set.insert(A(5));
        let copy = set.clone();
        assert_eq!(copy.get::<A>(), Some(&A(5)));
    }
}

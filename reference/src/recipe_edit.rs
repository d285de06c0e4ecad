//! A change of a family's recipe, as [`crate::ops::OpFamily::run_with_recipe_edit`] applies it. The
//! fault catalogue (`crate::faults`) and the knob flips hold the edits; an edit is typed by the
//! recipe it changes (`fn(&mut R) -> bool` for the family whose recipe is `R`), carried without
//! its type so that a catalogue of many families' edits is one list, and applied only by a
//! family that holds an `R` ([`RecipeEdit::apply`]). No list here names the families: a new
//! family's recipe is editable as soon as it exists.

use std::any::Any;

/// A change of one family's recipe; the function returns `false` when the recipe already has
/// the faulty value. Built with [`crate::recipe_edit!`] (or [`RecipeEdit::new`]
/// from a `static` function pointer), so that it can sit in a `static` catalogue.
#[derive(Clone, Copy)]
pub struct RecipeEdit {
    /// The `fn(&mut R) -> bool`, as an [`Any`].
    edit: &'static (dyn Any + Send + Sync),
    /// The name of `R`, for debug output.
    recipe: fn() -> &'static str,
}

impl RecipeEdit {
    /// The edit `f` of recipe type `R`.
    pub const fn new<R: 'static>(f: &'static fn(&mut R) -> bool) -> RecipeEdit {
        RecipeEdit {
            edit: f,
            recipe: std::any::type_name::<R>,
        }
    }

    /// The edit as a function of `R`, when it is an edit of `R`.
    pub fn of<R: 'static>(&self) -> Option<fn(&mut R) -> bool> {
        self.edit.downcast_ref::<fn(&mut R) -> bool>().copied()
    }

    /// Applies the edit to `r` when it is an edit of `R`: `Some(changed)`, or `None` for an
    /// edit of another recipe type.
    pub fn apply<R: 'static>(&self, r: &mut R) -> Option<bool> {
        self.of::<R>().map(|f| f(r))
    }

    /// Whether this is an edit of recipe type `R`.
    pub fn edits<R: 'static>(&self) -> bool {
        self.of::<R>().is_some()
    }
}

/// `r` changed by `edit` when `edit` is an edit of `R`; `r` as it was otherwise.
pub fn edited<R: 'static>(mut r: R, edit: Option<&RecipeEdit>) -> R {
    if let Some(e) = edit {
        e.apply(&mut r);
    }
    r
}

impl std::fmt::Debug for RecipeEdit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RecipeEdit<{}>", (self.recipe)())
    }
}

/// A [`RecipeEdit`] of recipe type `$recipe` from a closure (or function) `$edit`, usable in a
/// `static` initialiser: `recipe_edit!(Recipe, |r| { r.exp_impl = ...; true })`.
#[macro_export]
macro_rules! recipe_edit {
    ($recipe:ty, $edit:expr) => {{
        static EDIT: fn(&mut $recipe) -> bool = $edit;
        $crate::recipe_edit::RecipeEdit::new::<$recipe>(&EDIT)
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    struct A(u32);
    struct B;

    #[test]
    fn an_edit_applies_to_its_own_recipe_type_only() {
        static E: RecipeEdit = crate::recipe_edit!(A, |a| {
            a.0 += 1;
            a.0 != 1
        });
        let mut a = A(1);
        assert_eq!(E.apply(&mut a), Some(true));
        assert_eq!(a.0, 2);
        assert_eq!(E.apply(&mut B), None);
        assert!(E.edits::<A>() && !E.edits::<B>());
        assert!(format!("{E:?}").contains("::A>"), "{E:?}");
    }
}

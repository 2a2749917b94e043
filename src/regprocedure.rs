//! The `regprocedure` SQL type, for arguments that name a function by its
//! signature (`'deliver(jsonb)'`), resolved by PostgreSQL's own input rules.

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::pg_sys::{self, Oid};
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::{FromDatum, IntoDatum};

/// A function's oid, typed `regprocedure` in SQL.
#[derive(Clone, Copy, Debug)]
pub struct Regprocedure(pub Oid);

impl FromDatum for Regprocedure {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _: Oid) -> Option<Self> {
        (!is_null).then(|| Regprocedure(Oid::from(datum.value() as u32)))
    }
}

impl IntoDatum for Regprocedure {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(pg_sys::Datum::from(self.0))
    }

    fn type_oid() -> Oid {
        pg_sys::REGPROCEDUREOID
    }
}

// SAFETY: the argument is unboxed through FromDatum, which reads the datum
// as the oid that a regprocedure is (by value), and a NULL argument panics
// instead of making a value.
unsafe impl<'fcx> ArgAbi<'fcx> for Regprocedure {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        // SAFETY: our caller guarantees that the argument is a regprocedure;
        // from_polymorphic_datum turns NULL into None.
        unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"))
    }
}

// SAFETY: regprocedure is an alias of oid, passed by value, 4 bytes, which
// is what the Rust type holds and into_datum gives back.
unsafe impl SqlTranslatable for Regprocedure {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(Regprocedure);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> =
        Ok(SqlMappingRef::literal("regprocedure"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
        Ok(ReturnsRef::One(SqlMappingRef::literal("regprocedure")));
}

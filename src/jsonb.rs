//! `jsonb` values passed through untouched.
//!
//! pgrx's `JsonB` converts every value to text and through serde_json and
//! back, which is slow and can change numbers that do not fit an `f64`. A
//! payload must come back exactly as it went in, so the API takes and returns
//! `jsonb` as the server's own datum and never looks inside it.

use std::ptr::NonNull;

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::pg_sys;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::{FromDatum, IntoDatum, PgMemoryContexts};

/// The SQL type, argument passing and conversions of a type that holds a
/// datum by reference.
macro_rules! datum_by_reference {
    ($ty:ident, $sql:literal, $oid:ident) => {
        impl FromDatum for $ty {
            unsafe fn from_polymorphic_datum(
                datum: pg_sys::Datum,
                is_null: bool,
                _: pg_sys::Oid,
            ) -> Option<Self> {
                (!is_null).then_some($ty(datum))
            }

            /// Copies the value out of a memory context that is about to go
            /// away (the SPI result it was read from).
            unsafe fn from_datum_in_memory_context(
                mut memory_context: PgMemoryContexts,
                datum: pg_sys::Datum,
                is_null: bool,
                _: pg_sys::Oid,
            ) -> Option<Self> {
                if is_null {
                    return None;
                }
                // SAFETY: as FromDatum requires of our caller (pgrx's SPI,
                // which checked the column's type against type_oid()),
                // memory_context is a live context and the datum, not null
                // here, is a varlena of this type; pg_detoast_datum_copy
                // copies it (detoasted) into that context, which outlives
                // the SPI result.
                unsafe {
                    memory_context.switch_to(|_| {
                        let copy = pg_sys::pg_detoast_datum_copy(datum.cast_mut_ptr());
                        Some($ty(pg_sys::Datum::from(copy)))
                    })
                }
            }
        }

        impl IntoDatum for $ty {
            fn into_datum(self) -> Option<pg_sys::Datum> {
                Some(self.0)
            }

            fn type_oid() -> pg_sys::Oid {
                pg_sys::$oid
            }
        }

        // SAFETY: the argument is unboxed through FromDatum, which only
        // wraps the datum (of the SQL type below, as pgrx declares the
        // function), and a NULL argument panics instead of making a value.
        unsafe impl<'fcx> ArgAbi<'fcx> for $ty {
            unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
                let index = arg.index();
                // SAFETY: our caller guarantees that the argument is of this
                // type; from_polymorphic_datum turns NULL into None.
                unsafe { arg.unbox_arg_using_from_datum() }
                    .unwrap_or_else(|| panic!("argument {index} must not be null"))
            }
        }

        // SAFETY: the SQL type named here is the one whose datums the Rust
        // type holds, by reference, and whose oid type_oid() gives.
        unsafe impl SqlTranslatable for $ty {
            const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!($ty);
            const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
            const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> =
                Ok(SqlMappingRef::literal($sql));
            const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
                Ok(ReturnsRef::One(SqlMappingRef::literal($sql)));
        }
    };
}

/// A `jsonb` datum, by reference.
#[derive(Clone, Copy, Debug)]
pub struct Jsonb(pg_sys::Datum);

datum_by_reference!(Jsonb, "jsonb", JSONBOID);

impl Jsonb {
    pub fn datum(self) -> pg_sys::Datum {
        self.0
    }

    /// A copy, detoasted, in the current memory context, of `datum`.
    ///
    /// # Safety
    ///
    /// `datum` is a non-null jsonb datum, live for the call.
    pub unsafe fn copy_of(datum: pg_sys::Datum) -> Jsonb {
        // SAFETY: as our caller guarantees; pg_detoast_datum_copy returns a
        // palloc'd copy (or raises an ERROR), never NULL.
        Jsonb(pg_sys::Datum::from(unsafe {
            pg_sys::pg_detoast_datum_copy(datum.cast_mut_ptr())
        }))
    }

    /// How many bytes the value takes, uncompressed (a result's limit,
    /// contract::MAX_RESULT_BYTES, is on this).
    pub fn size(self) -> usize {
        // SAFETY: self.0 is a non-null jsonb datum, a varlena, maybe
        // toasted: toast_raw_datum_size reads its header (or its toast
        // pointer) only.
        unsafe { pg_sys::toast_raw_datum_size(self.0) }
    }

    /// `value` as a jsonb datum in the current memory context.
    pub fn from_json(value: &serde_json::Value) -> Jsonb {
        let datum = pgrx::JsonB(value.clone())
            .into_datum()
            .expect("a jsonb datum");
        Jsonb(datum)
    }

    /// The text of an object's field `key` (`->>`), None when it has none.
    pub fn field_text(self, key: &str) -> Option<String> {
        // SAFETY: self.0 is a non-null jsonb datum, and the key a text
        // datum: jsonb_object_field_text's two arguments; it returns text
        // or SQL NULL, which direct_function_call converts.
        unsafe {
            pgrx::direct_function_call(
                pg_sys::jsonb_object_field_text,
                &[Some(self.0), key.into_datum()],
            )
        }
    }

    /// An object's field `key` (`->`), None when it has none.
    pub fn field(self, key: &str) -> Option<Jsonb> {
        // SAFETY: as in field_text; jsonb_object_field returns jsonb or
        // SQL NULL.
        let datum: Option<pg_sys::Datum> = unsafe {
            pgrx::direct_function_call_as_datum(
                pg_sys::jsonb_object_field,
                &[Some(self.0), key.into_datum()],
            )
        };
        datum.map(Jsonb)
    }

    /// An object's fields and `other`'s (`||`: other's win).
    pub fn concat(self, other: Jsonb) -> Jsonb {
        // SAFETY: two non-null jsonb datums, jsonb_concat's arguments; it
        // returns a new jsonb datum.
        let datum: Option<pg_sys::Datum> = unsafe {
            pgrx::direct_function_call_as_datum(
                pg_sys::jsonb_concat,
                &[Some(self.0), Some(other.0)],
            )
        };
        Jsonb(datum.expect("jsonb_concat returns a value"))
    }

    /// The JSON type of the value (`object`, `array`, `string`, ...).
    pub fn type_name(self) -> String {
        // SAFETY: self.0 is a non-null jsonb datum (a Jsonb is only made
        // from one), jsonb_typeof's one argument; it returns text, which
        // direct_function_call converts to a String.
        let typ: Option<String> =
            unsafe { pgrx::direct_function_call(pg_sys::jsonb_typeof, &[Some(self.0)]) };
        typ.unwrap_or_default()
    }
}

// SAFETY: a Jsonb is never SQL NULL, so returning its datum as a non-null
// result of the declared type jsonb is what the caller expects.
unsafe impl BoxRet for Jsonb {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        // SAFETY: self.0 is a non-null jsonb datum, and our caller returns
        // the result to PostgreSQL, as return_raw_datum requires.
        unsafe { fcinfo.return_raw_datum(self.0) }
    }
}

/// A `jsonb[]` datum, by reference: handed to SQL whole, as one parameter.
#[derive(Clone, Copy, Debug)]
pub struct JsonbArray(pg_sys::Datum);

datum_by_reference!(JsonbArray, "jsonb[]", JSONBARRAYOID);

/// What a batch enqueue needs to know of its array before it stores it.
#[derive(Debug, PartialEq, Eq)]
pub struct ArrayShape {
    pub len: usize,
    pub dimensions: usize,
    /// 1-based position of the first NULL element.
    pub first_null: Option<usize>,
}

impl JsonbArray {
    /// Its elements, in order (None: NULL), which point into the array.
    pub fn elements(self) -> Vec<Option<Jsonb>> {
        let (mut datums, mut nulls, mut n) = (std::ptr::null_mut(), std::ptr::null_mut(), 0);
        // SAFETY: self.0 is a non-null jsonb[] datum; pg_detoast_datum
        // returns it or a palloc'd detoasted copy; deconstruct_array, given
        // jsonb's element layout (varlena, 'i' alignment), fills in palloc'd
        // arrays of `n` datums and null flags, which point into the array,
        // live as long as the call's memory.
        unsafe {
            let array = pg_sys::pg_detoast_datum(self.0.cast_mut_ptr()) as *mut pg_sys::ArrayType;
            pg_sys::deconstruct_array(
                array,
                pg_sys::JSONBOID,
                -1,
                false,
                b'i' as std::ffi::c_char,
                &mut datums,
                &mut nulls,
                &mut n,
            );
            (0..n as usize)
                .map(|i| (!*nulls.add(i)).then(|| Jsonb(*datums.add(i))))
                .collect()
        }
    }

    pub fn shape(self) -> ArrayShape {
        // SAFETY: self.0 is a non-null jsonb[] datum (a JsonbArray is only
        // made from one); pg_detoast_datum returns it, or a palloc'd
        // detoasted copy, and never NULL (it raises an ERROR instead).
        let ptr =
            unsafe { pg_sys::pg_detoast_datum(self.0.cast_mut_ptr()) } as *mut pg_sys::ArrayType;
        // SAFETY: ptr is a detoasted, aligned and initialized ArrayType, live
        // for this call (the argument's or the SPI result's memory), that
        // nothing changes meanwhile: the RawArray only reads it.
        let mut raw = unsafe { pgrx::array::RawArray::from_ptr(NonNull::new_unchecked(ptr)) };
        let len = raw.len();
        let dimensions = raw.dims().len();
        let first_null = raw.nulls_bitslice().and_then(|bits| {
            // a set bit means "not null"
            // SAFETY: nulls_bitslice gave the array's null bitmap, `len`
            // bits inside the array read above, which is still live.
            unsafe { bits.as_ref() }
                .iter()
                .take(len)
                .position(|bit| !*bit)
                .map(|i| i + 1)
        });
        ArrayShape {
            len,
            dimensions,
            first_null,
        }
    }
}

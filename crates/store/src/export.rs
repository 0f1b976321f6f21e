//! `vtnt export`: one table of the store, one tenant's rows, for pandas and R. CSV
//! (RFC 4180: a header line of the column names, fields quoted when they hold a comma, a
//! quote or a line break, NULL as an empty field, BLOBs in hex) always; Parquet with the
//! feature `parquet` (arrow's writer: INTEGER columns as Int64, REAL as Float64, TEXT as
//! UTF-8, BLOB as binary, every column nullable; uncompressed: the build leaves the
//! parquet crate's codecs out).

use std::io::Write;

use rusqlite::types::{Value, ValueRef};

use crate::error::{Result, StoreError};
use crate::schema::TABLES;
use crate::{Store, Tenant};

/// A file format of [`Store::export`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Csv,
    Parquet,
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<ExportFormat, String> {
        match s {
            "csv" => Ok(ExportFormat::Csv),
            "parquet" => Ok(ExportFormat::Parquet),
            _ => Err(format!("`{s}`: csv or parquet")),
        }
    }
}

/// The tables [`Store::export`] takes, in the schema's order.
pub fn tables() -> impl Iterator<Item = &'static str> {
    TABLES.iter().map(|(t, _)| *t)
}

/// A table's columns and their declared types.
fn columns(store: &Store, table: &str) -> Result<Vec<(String, String)>> {
    store.rows(
        "SELECT name, type FROM pragma_table_info(?1) ORDER BY cid",
        &[Value::Text(table.into())],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

impl Store {
    /// Writes `tenant`'s rows of `table` to `out` in `format`; returns how many.
    pub fn export(
        &self,
        tenant: &Tenant,
        table: &str,
        format: ExportFormat,
        out: impl Write + Send,
    ) -> Result<u64> {
        let Some((_, filter)) = TABLES.iter().find(|(t, _)| *t == table) else {
            return Err(StoreError::Invalid(format!(
                "table `{table}`: one of {}",
                tables().collect::<Vec<_>>().join(", ")
            )));
        };
        let cols = columns(self, table)?;
        let sql = format!("SELECT x.* FROM {table} x WHERE {filter}");
        let what = || format!("{}: exporting {table}", self.path);
        let mut st = self.conn.prepare(&sql).map_err(StoreError::sql(what()))?;
        let mut rows = st
            .query([tenant.as_str()])
            .map_err(StoreError::sql(what()))?;
        match format {
            ExportFormat::Csv => csv(&mut rows, &cols, out, &what()),
            #[cfg(feature = "parquet")]
            ExportFormat::Parquet => parquet::write(&mut rows, &cols, out, &what()),
            #[cfg(not(feature = "parquet"))]
            ExportFormat::Parquet => Err(StoreError::Invalid(
                "this vtnt was built without Parquet (cargo feature `parquet`); use --format csv"
                    .into(),
            )),
        }
    }
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |e| StoreError::Invalid(format!("{what}: writing: {e}"))
}

/// One CSV field.
fn field(v: ValueRef<'_>) -> String {
    let text = match v {
        ValueRef::Null => return String::new(),
        ValueRef::Integer(i) => return i.to_string(),
        ValueRef::Real(f) => return f.to_string(),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Blob(b) => return crate::import::hex(b),
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

fn csv(
    rows: &mut rusqlite::Rows<'_>,
    cols: &[(String, String)],
    out: impl Write,
    what: &str,
) -> Result<u64> {
    let mut out = std::io::BufWriter::new(out);
    let header: Vec<&str> = cols.iter().map(|(c, _)| c.as_str()).collect();
    writeln!(out, "{}", header.join(",")).map_err(io_err(what))?;
    let mut n = 0;
    while let Some(r) = rows.next().map_err(StoreError::sql(what))? {
        let fields: Vec<String> = (0..cols.len())
            .map(|i| r.get_ref(i).map(field))
            .collect::<rusqlite::Result<_>>()
            .map_err(StoreError::sql(what))?;
        writeln!(out, "{}", fields.join(",")).map_err(io_err(what))?;
        n += 1;
    }
    out.flush().map_err(io_err(what))?;
    Ok(n)
}

#[cfg(feature = "parquet")]
mod parquet {
    //! Rows as Parquet, a row group per [`BATCH`] rows.

    use std::io::Write;
    use std::sync::Arc;

    use arrow_array::builder::{BinaryBuilder, Float64Builder, Int64Builder, StringBuilder};
    use arrow_array::{ArrayRef, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use rusqlite::types::ValueRef;

    use crate::error::{Result, StoreError};

    const BATCH: usize = 65_536;

    enum Column {
        Int(Int64Builder),
        Real(Float64Builder),
        Text(StringBuilder),
        Blob(BinaryBuilder),
    }

    impl Column {
        fn of(decl: &str) -> (Column, DataType) {
            match decl {
                "INTEGER" => (Column::Int(Int64Builder::new()), DataType::Int64),
                "REAL" => (Column::Real(Float64Builder::new()), DataType::Float64),
                "BLOB" => (Column::Blob(BinaryBuilder::new()), DataType::Binary),
                _ => (Column::Text(StringBuilder::new()), DataType::Utf8),
            }
        }

        fn push(&mut self, v: ValueRef<'_>) {
            match (self, v) {
                (Column::Int(b), ValueRef::Integer(i)) => b.append_value(i),
                (Column::Real(b), ValueRef::Real(f)) => b.append_value(f),
                (Column::Real(b), ValueRef::Integer(i)) => b.append_value(i as f64),
                (Column::Blob(b), ValueRef::Blob(x)) => b.append_value(x),
                (Column::Text(b), ValueRef::Text(t)) => b.append_value(String::from_utf8_lossy(t)),
                (Column::Int(b), _) => b.append_null(),
                (Column::Real(b), _) => b.append_null(),
                (Column::Blob(b), _) => b.append_null(),
                (Column::Text(b), _) => b.append_null(),
            }
        }

        fn finish(&mut self) -> ArrayRef {
            match self {
                Column::Int(b) => Arc::new(b.finish()),
                Column::Real(b) => Arc::new(b.finish()),
                Column::Blob(b) => Arc::new(b.finish()),
                Column::Text(b) => Arc::new(b.finish()),
            }
        }
    }

    pub fn write(
        rows: &mut rusqlite::Rows<'_>,
        cols: &[(String, String)],
        out: impl Write + Send,
        what: &str,
    ) -> Result<u64> {
        let bad = |e: &dyn std::fmt::Display| StoreError::Invalid(format!("{what}: {e}"));
        let (mut builders, fields): (Vec<Column>, Vec<Field>) = cols
            .iter()
            .map(|(name, decl)| {
                let (b, t) = Column::of(decl);
                (b, Field::new(name, t, true))
            })
            .unzip();
        let schema = Arc::new(Schema::new(fields));
        let mut w =
            parquet::arrow::ArrowWriter::try_new(out, schema.clone(), None).map_err(|e| bad(&e))?;
        let mut n = 0u64;
        let mut pending = 0;
        let flush = |builders: &mut Vec<Column>, w: &mut parquet::arrow::ArrowWriter<_>| {
            let arrays: Vec<ArrayRef> = builders.iter_mut().map(Column::finish).collect();
            let batch = RecordBatch::try_new(schema.clone(), arrays).map_err(|e| bad(&e))?;
            w.write(&batch).map_err(|e| bad(&e))
        };
        while let Some(r) = rows.next().map_err(StoreError::sql(what))? {
            for (i, b) in builders.iter_mut().enumerate() {
                b.push(r.get_ref(i).map_err(StoreError::sql(what))?);
            }
            n += 1;
            pending += 1;
            if pending == BATCH {
                flush(&mut builders, &mut w)?;
                pending = 0;
            }
        }
        if pending > 0 || n == 0 {
            flush(&mut builders, &mut w)?;
        }
        w.close().map_err(|e| bad(&e))?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_quote_what_needs_it() {
        assert_eq!(field(ValueRef::Null), "");
        assert_eq!(field(ValueRef::Integer(-3)), "-3");
        assert_eq!(field(ValueRef::Text(b"plain")), "plain");
        assert_eq!(field(ValueRef::Text(b"a,b")), "\"a,b\"");
        assert_eq!(
            field(ValueRef::Text(b"say \"hi\"\n")),
            "\"say \"\"hi\"\"\n\""
        );
        assert_eq!(field(ValueRef::Blob(&[0, 255])), "00ff");
    }
}

//! Unit tests of the reader.

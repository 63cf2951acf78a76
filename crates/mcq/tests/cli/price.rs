//! `mcq price` and `mcq bench kernel` as a user runs them.

use super::mcq;

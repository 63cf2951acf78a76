//! `mcq bench compare` end to end on a small configuration.

use super::mcq;

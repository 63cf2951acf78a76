//! Workers on a real embedded store: the loop waits instead of spinning,
//! hands work to an idle worker, and records a lone result at once; and a
//! fleet on PostgreSQL that shares a staged batch.

mod common;
mod fleet;
mod hand_off;
mod loop_turns;
mod pace;
mod recording;

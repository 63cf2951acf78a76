//! `sqlx::migrate!` embeds the migration files at compile time; rebuild
//! when one is added or edited.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}

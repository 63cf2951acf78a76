//! Local versus distributed: measures the same batch on several platforms, writes tables, CSV, JSON and charts

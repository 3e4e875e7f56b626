"""mptlab analysis: run dirs to tidy tables, statistics, figures, reports and
baseline comparison (see docs/analysis.md)."""

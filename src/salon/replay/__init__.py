"""``salon replay``'s parts: sources, arms, the replay, billing by vendors' rules, labels
and reports."""

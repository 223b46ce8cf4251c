"""Running cases: worker processes, contexts applied, contention, the campaign driver."""

"""Operations: compaction, VACUUM and the scheduler that runs them (with archiving) per table."""

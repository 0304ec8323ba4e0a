"""What a user chooses for a book: the options (`options`), pronunciation lexicons, named voices,
and how they turn into the engine's requests (`delivery`)."""

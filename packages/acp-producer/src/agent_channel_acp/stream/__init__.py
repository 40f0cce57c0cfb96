"""The stream machinery both modes share: one hub per execution, one binding per client session."""

"""Model families. Each module registers its models with :func:`base.register`."""

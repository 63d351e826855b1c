"""Create the trips fact table (live, archive and rejects) from tables/trips.yaml."""


def upgrade(ctx):
    ctx.create_table("trips")

"""Create the driver_pings stream table (live, archive and rejects) from tables/driver_pings.yaml."""


def upgrade(ctx):
    ctx.create_table("driver_pings")

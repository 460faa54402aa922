from nslm.cli import run

run()

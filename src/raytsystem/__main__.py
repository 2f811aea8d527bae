from .cli import main

# Guarded: a helper process started with multiprocessing's "spawn" imports this module again
# (under another name) and must not run a second command.
if __name__ == "__main__":
    main()

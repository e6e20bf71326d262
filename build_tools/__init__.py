"""Helpers of setup.py's build of cnncuda._C, importable on their own so that
tests/packaging/test_build.py checks them without a compiler:

- archs.py: which GPU architectures nvcc compiles for;
- jobs.py: how many compilers run at once, and running them;
- objcache.py: the object cache that makes a rebuild with no change quick.

Not part of the installed package.
"""

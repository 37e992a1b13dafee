bash -c install_or_build

#include "client/cli.h"

int main(int argc, char** argv) { return meshrt::RunCli(argc, argv); }

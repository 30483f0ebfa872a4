#include "coordinator/coordinator_main.h"

int main(int argc, char** argv) { return meshrt::CoordinatorMain(argc, argv); }

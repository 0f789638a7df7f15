/*
** Trident: neural-network training in C on CPU, CUDA and Vulkan.
** Include this header for the whole public API.
*/
#ifndef TRIDENT_H
#define TRIDENT_H

#include "status.h"
#include "tensor.h"
#include "ops.h"
#include "autograd.h"
#include "nn.h"
#include "optim.h"
#include "data.h"
#include "io.h"

#endif /* TRIDENT_H */

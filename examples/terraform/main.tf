# One `terraform apply` (or `tofu apply`) creates an EKS cluster and
# bootstraps it with khook: the cluster module's outputs, unknown until the
# cluster exists, feed khook_spec's kubernetes block (khook plans offline
# until then). See docs/terraform.md.

terraform {
  required_version = ">= 1.11" # write-only arguments (OpenTofu 1.11+)
  required_providers {
    aws   = { source = "hashicorp/aws", version = "~> 6.0" }
    khook = { source = "khook-io/khook" }
  }
}

variable "region" {
  type    = string
  default = "eu-west-1"
}

variable "git_token" {
  type      = string
  sensitive = true
  ephemeral = true # never in a plan file; it only reaches a write-only argument
}

variable "git_token_version" {
  type        = string
  default     = "1"
  description = "Bump it when git_token changes (write-only values cannot be compared)."
}

provider "aws" {
  region = var.region
}

module "vpc" {
  source  = "terraform-aws-modules/vpc/aws"
  version = "~> 6.0"

  name            = "platform"
  cidr            = "10.0.0.0/16"
  azs             = ["${var.region}a", "${var.region}b", "${var.region}c"]
  private_subnets = ["10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24"]
  public_subnets  = ["10.0.101.0/24", "10.0.102.0/24", "10.0.103.0/24"]
  enable_nat_gateway = true
}

module "eks" {
  source  = "terraform-aws-modules/eks/aws"
  version = "~> 21.0"

  name               = "platform"
  kubernetes_version = "1.35"
  vpc_id             = module.vpc.vpc_id
  subnet_ids         = module.vpc.private_subnets
  endpoint_public_access                   = true
  enable_cluster_creator_admin_permissions = true

  eks_managed_node_groups = {
    default = { instance_types = ["m6i.large"], min_size = 2, max_size = 4, desired_size = 2 }
  }
}

resource "khook_spec" "bootstrap" {
  spec     = file("${path.module}/bootstrap.yaml")
  base_dir = path.module
  vars = {
    CLUSTER_NAME = module.eks.cluster_name
    REGION       = var.region
  }
  secrets         = { GIT_TOKEN = var.git_token }
  secrets_version = var.git_token_version

  kubernetes {
    host                   = module.eks.cluster_endpoint
    cluster_ca_certificate = base64decode(module.eks.cluster_certificate_authority_data)
    exec {
      api_version = "client.authentication.k8s.io/v1beta1"
      command     = "aws"
      args        = ["eks", "get-token", "--cluster-name", module.eks.cluster_name, "--region", var.region]
    }
  }

  timeouts {
    create = "45m"
  }

  # The nodes must outlive khook's destroy (it uninstalls the releases).
  depends_on = [module.eks]
}

output "bootstrap_steps" {
  value = khook_spec.bootstrap.steps
}

// Everything a program using EmberDB needs: #include "ember/ember.h".
#pragma once
#include "ember/backup.h"
#include "ember/blob.h"
#include "ember/database.h"
#include "ember/options.h"
#include "ember/schema.h"
#include "ember/stats.h"
#include "ember/transaction.h"
